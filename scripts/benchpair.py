#!/usr/bin/env python3
"""Two modes of one benchmark, alternated, as paired ratios.

On a machine whose load moves from second to second, two benchmark runs
minutes apart do not compare; runs side by side do. This runs mode A and
mode B of a benchmark one after the other (the order flipping each round)
in each of one or more compiled test binaries (say, the tree before a
change and after it), and prints per binary the medians of each mode and
the median and interquartile range of the per-round ratio B/A, of CPU
time (the benchmark's cpu-ns/op metric, the process's user and system
time) and of wall time.

Usage:
  go test -c -o /tmp/new.test ./services/agentcontroller
  python3 scripts/benchpair.py new=/tmp/new.test [old=/tmp/old.test ...] -- \\
      BenchmarkAdmissionTelemetry telemetry=off telemetry=sampling-0 16 300000x

The benchmark must report cpu-ns/op and be run with -benchmem (done here).
"""
import re
import statistics as st
import subprocess
import sys

LINE = re.compile(r'\s(\d+(?:\.\d+)?) ns/op\s+(\d+(?:\.\d+)?) cpu-ns/op\s+(\d+) B/op\s+(\d+) allocs/op')


def run(binary, bench, mode, benchtime):
    out = subprocess.run([binary, '-test.run', '^$', '-test.bench', f'{bench}/{mode}$',
                          '-test.benchtime', benchtime, '-test.benchmem'],
                         capture_output=True, text=True).stdout
    m = LINE.search(out)
    if not m:
        sys.exit(f'{binary} {mode}: no benchmark line in\n{out}')
    return float(m.group(1)), float(m.group(2)), int(m.group(3)), int(m.group(4))


def spread(xs):
    q = st.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return f'median {st.median(xs):.3f}, IQR {q[0]:.3f}-{q[2]:.3f}'


def main():
    args = sys.argv[1:]
    if '--' not in args:
        sys.exit(__doc__)
    i = args.index('--')
    bins = [a.split('=', 1) for a in args[:i]]
    bench, mode_a, mode_b, rounds, benchtime = args[i + 1:i + 6]
    res = {(label, m): [] for label, _ in bins for m in (mode_a, mode_b)}
    for r in range(int(rounds)):
        order = (mode_a, mode_b) if r % 2 == 0 else (mode_b, mode_a)
        for label, binary in bins:
            for m in order:
                res[(label, m)].append(run(binary, bench, m, benchtime))
        print(f'round {r + 1} done', file=sys.stderr, flush=True)
    for label, _ in bins:
        a, b = res[(label, mode_a)], res[(label, mode_b)]
        print(f'{label}: {mode_a} {st.median(x[1] for x in a):.0f} ns CPU, {st.median(x[0] for x in a):.0f} ns wall, '
              f'{a[0][3]} allocs, {a[0][2]} B; {mode_b} {st.median(x[1] for x in b):.0f} ns CPU, '
              f'{st.median(x[0] for x in b):.0f} ns wall, {b[0][3]} allocs, {b[0][2]} B')
        print(f'  {mode_b}/{mode_a} CPU: {spread([y[1] / x[1] for x, y in zip(a, b)])}')
        print(f'  {mode_b}/{mode_a} wall: {spread([y[0] / x[0] for x, y in zip(a, b)])}')


if __name__ == '__main__':
    main()
