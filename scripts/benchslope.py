#!/usr/bin/env python3
"""CPU per unit of one benchmark in two compiled test binaries, by slope.

A benchmark without a mode to compare against in the same binary (the
agent loop's BenchmarkStep before and after a change) is compared across
two binaries, the tree before and after, alternated round by round with the
order flipping. Each round runs the benchmark at two fixed counts in each
binary and takes the process's user+system time (the children's rusage);
the difference over the difference of counts is the CPU per op, free of the
process's start and the benchmark's setup. units_per_op divides further (a
BenchmarkStep op is a turn of 100 steps). Prints the medians and the
median and interquartile range of the per-round ratio new/old.

Usage:
  git archive <base> | tar -x -C /tmp/base && (cd /tmp/base && go test -c -o /tmp/old.test ./services/agentloop)
  go test -c -o /tmp/new.test ./services/agentloop
  python3 scripts/benchslope.py old=/tmp/old.test new=/tmp/new.test BenchmarkStep 20 220 12 100

Arguments after the binaries: benchmark, low count, high count, rounds,
units per op. Runs with -test.cpu 1.
"""
import re
import resource
import statistics as st
import subprocess
import sys


def cpu(binary, bench, n):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([binary, '-test.run', '^$', '-test.bench', f'^{bench}$', '-test.benchtime', f'{n}x',
                          '-test.cpu', '1', '-test.benchmem'], capture_output=True, text=True).stdout
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = re.search(r'(\d+) B/op\s+(\d+) allocs/op', out)
    if not m:
        sys.exit(f'{binary}: no benchmark line in\n{out}')
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), m.groups()


def main():
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    bins = [a.split('=', 1) for a in sys.argv[1:3]]
    bench = sys.argv[3]
    lo, hi, rounds, per = (int(x) for x in sys.argv[4:8])
    res = {label: [] for label, _ in bins}
    mem = {}
    for r in range(rounds):
        for label, binary in (bins if r % 2 == 0 else bins[::-1]):
            c_lo, _ = cpu(binary, bench, lo)
            c_hi, mem[label] = cpu(binary, bench, hi)
            res[label].append((c_hi - c_lo) / ((hi - lo) * per) * 1e9)
        print(f'round {r + 1} done', file=sys.stderr, flush=True)
    (a, _), (b, _) = bins
    ratios = [y / x for x, y in zip(res[a], res[b])]
    q = st.quantiles(ratios, n=4)
    print(f'{bench}: {a} {st.median(res[a]):.0f} ns CPU per unit ({mem[a][1]} allocs, {mem[a][0]} B per op), '
          f'{b} {st.median(res[b]):.0f} ns ({mem[b][1]} allocs, {mem[b][0]} B); '
          f'{b}/{a} median {st.median(ratios):.3f}, IQR {q[0]:.3f}-{q[2]:.3f}, {rounds} rounds')


if __name__ == '__main__':
    main()
