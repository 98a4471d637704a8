#!/usr/bin/env python3
"""`dsh sessions list` as an operator runs it (issue 38): a whole process —
config load, the store plugin's start, the first page of one agent, its
output — on an N-session session.jsonl store, against two floors timed in
the same rounds:

  - "page in-process": the same page asked of a host that is already
    running, in a loop in one process (what the process cannot do without);
  - "links what dsh links": a program that imports every package cmd/dsh
    imports and does nothing (scripts/coldstart.py; what no change to dsh's
    own code can get under).

The target is the process within ~1.5x (page + link floor). Each figure is
CPU (user + system of the child, from getrusage) and wall; medians per
round, the range over rounds. With --stale the directory's mtime moves
before each listing (a session created or removed by hand: the listing
reads the directory's names); without, the census holds.

Usage, from the repository root:
  python3 scripts/sessionslist.py [--n 100000] [--runs 20] [--rounds 5] [--stale]
CI runs it small: --n 2000 --runs 3 --rounds 1 (it fails on a wrong page).
"""
import argparse, json, os, resource, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coldstart  # noqa: E402

ROOT = coldstart.ROOT

# The in-process floor: what cmd/dsh links, one host kept, a page per
# iteration; prints the median CPU and wall of a page in ms.
PAGE = '''package main

import (
	stdctx "context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/session"
%s)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	iters, _ := strconv.Atoi(os.Args[2])
	stale := os.Args[3] == "stale"
	cfg, err := config.Load(config.LoadOptions{Path: os.Args[1]})
	if err != nil {
		panic(err)
	}
	h, err := host.Start(cfg.OnlyPlugins(config.IsSessionStore), host.Options{LogOutput: io.Discard})
	if err != nil {
		panic(err)
	}
	dir := os.Args[4]
	var cpus, walls []float64
	for i := range iters {
		if stale {
			past := time.Now().Add(-time.Hour - time.Duration(i)*time.Second)
			os.Chtimes(dir, past, past)
		}
		c, w := cpu(), time.Now()
		p, err := h.Sessions().ListPage(stdctx.Background(), session.ListOptions{Agent: "agent3", Limit: 50})
		if err != nil || len(p.Sessions) != 50 {
			panic(fmt.Sprint(len(p.Sessions), err))
		}
		cpus = append(cpus, float64(cpu()-c)/1e6)
		walls = append(walls, float64(time.Since(w))/1e6)
	}
	slices.Sort(cpus)
	slices.Sort(walls)
	fmt.Println(cpus[len(cpus)/2], walls[len(walls)/2])
}
'''

TURN = ('{{"seq":1,"type":"turn/start","time":"{t}","turn":1,"agent":"{agent}"}}\n'
        '{{"seq":2,"type":"user/message","time":"{t}","turn":1,"message":{{"role":"user","content":"task {i}: summarize the design"}}}}\n'
        '{{"seq":3,"type":"step/start","time":"{t}","turn":1,"step":1}}\n'
        '{{"seq":4,"type":"assistant/message","time":"{t}","turn":1,"step":1,"message":{{"role":"assistant","content":"done"}}}}\n'
        '{{"seq":5,"type":"step/end","time":"{t}","turn":1,"step":1}}\n'
        '{{"seq":6,"type":"turn/end","time":"{t}","turn":1,"reason":"stop"}}\n')

def gen_store(dir, n, agents=10):
    base = 1795000000  # 2026-11-18
    for i in range(n):
        t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base + i * 7919 % n))
        with open(os.path.join(dir, f"g{i:06d}.jsonl"), "w") as f:
            f.write(TURN.format(t=t, agent=f"agent{i % agents}", i=i))

def age(dir, seconds=3600):
    past = time.time() - seconds
    os.utime(dir, (past, past))

def run(cmd, stale_dir=None):
    if stale_dir:
        age(stale_dir, 3600 + time.time() % 600)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--stale", action="store_true")
    ap.add_argument("--bin", help="build the three programs here once, and reuse them")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bin = a.bin or tmp
        os.makedirs(bin, exist_ok=True)
        imports = "".join(l + "\n" for l in coldstart.link_all().splitlines() if l.startswith("\t_ "))
        for name, text in (("linkall", coldstart.link_all()), ("page", PAGE % imports)):
            if a.bin and os.path.exists(os.path.join(bin, name)):
                continue
            src = tempfile.mkdtemp(prefix=".sessionslist-", dir=ROOT)
            try:
                with open(os.path.join(src, "main.go"), "w") as f:
                    f.write(text)
                coldstart.build(os.path.join(bin, name), "./" + os.path.basename(src))
            finally:
                subprocess.run(["rm", "-rf", src])
        if not (a.bin and os.path.exists(os.path.join(bin, "dsh"))):
            coldstart.build(os.path.join(bin, "dsh"), "./cmd/dsh")
        store = os.path.join(tmp, "sessions")
        os.mkdir(store)
        gen_store(store, a.n)
        cfg = os.path.join(tmp, "config.yaml")
        with open(cfg, "w") as f:
            # A provider whose key is missing: it must not start.
            f.write(f"plugins:\n  - use: llm.deepseek\n  - use: session.jsonl\n    config: {{dir: {json.dumps(store)}}}\n"
                    "agents:\n  - id: main\n    provider: deepseek\nlog: {level: warn}\n")
        os.environ["DEEPSEEK_API_KEY"] = ""
        os.environ["DSH_CONFIG"] = ""
        dsh = [os.path.join(bin, "dsh"), "--config", cfg, "sessions", "list", "--json", "--agent", "agent3", "--limit", "50"]
        run(dsh)          # writes the catalog
        age(store)
        run(dsh)          # writes a census
        _, _, out = run(dsh)
        page = json.loads(out.stdout)
        want = sorted((i for i in range(a.n) if i % 10 == 3), key=lambda i: (-(i * 7919 % a.n), -i))[:50]
        if len(page) != min(50, len(want)) or page[0]["id"] != f"g{want[0]:06d}":
            sys.exit(f"a wrong page: {len(page)} sessions, first {page[0]['id'] if page else None}, want g{want[0]:06d}")
        stale = store if a.stale else None
        mode = "stale" if a.stale else "fast"
        progs = {"links what dsh links": [os.path.join(bin, "linkall")], "dsh sessions list": dsh}
        rows = {k: [] for k in ("page in-process", *progs)}
        for _ in range(a.rounds):
            for _ in range(2):  # warm-up
                for k, cmd in progs.items():
                    run(cmd, stale)
            _, _, out = run([os.path.join(bin, "page"), cfg, str(a.runs), mode, store])
            pc, pw = map(float, out.stdout.split())
            rows["page in-process"].append((pw / 1e3, pc / 1e3))
            samples = {k: [] for k in progs}
            for _ in range(a.runs):
                for k, cmd in progs.items():
                    samples[k].append(run(cmd, stale if k == "dsh sessions list" else None)[:2])
            for k, s in samples.items():
                rows[k].append((statistics.median(w for w, _ in s), statistics.median(c for _, c in s)))
    print(f"{a.n} sessions, census {'stale' if a.stale else 'valid'}; median per round, range over {a.rounds} rounds")
    for k, r in rows.items():
        print(f"{k + ':':24s} cpu {min(c for _, c in r)*1e3:6.1f}-{max(c for _, c in r)*1e3:6.1f} ms, "
              f"wall {min(w for w, _ in r)*1e3:6.1f}-{max(w for w, _ in r)*1e3:6.1f} ms")
    ratios = [(p[1] / (f[1] + l[1]), p[0] / (f[0] + l[0])) for f, l, p in
              zip(rows["page in-process"], rows["links what dsh links"], rows["dsh sessions list"])]
    print(f"process / (page + link floor): cpu {min(c for c, _ in ratios):.2f}-{max(c for c, _ in ratios):.2f}x, "
          f"wall {min(w for _, w in ratios):.2f}-{max(w for _, w in ratios):.2f}x")

if __name__ == "__main__":
    main()
