#!/usr/bin/env python3
"""Cold start of `dsh run -p hi` against its floor, a hello world that links
gRPC and the plugin protocol's generated code, both release builds.

Runs the two alternately (after warm-ups) and prints the median wall time
and CPU time (user + system, from getrusage) of each, and their ratio.
Usage, from the repository root: python3 scripts/coldstart.py [runs]
"""
import os, resource, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ["-trimpath", "-tags", "grpcnotrace", "-ldflags=-s -w"]
HELLO = '''package main

import (
	"fmt"

	_ "github.com/dsh-go/dsh/sdk/proto/pluginv1"
	_ "google.golang.org/grpc"
)

func main() { fmt.Println("hi") }
'''

def build(out, pkg):
    env = dict(os.environ, CGO_ENABLED="0")
    subprocess.run(["go", "build", *FLAGS, "-o", out, pkg], cwd=ROOT, env=env, check=True)

def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    with tempfile.TemporaryDirectory() as tmp:
        # The floor must live inside the module to import its packages.
        src = tempfile.mkdtemp(prefix=".coldstart-", dir=ROOT)
        try:
            with open(os.path.join(src, "main.go"), "w") as f:
                f.write(HELLO)
            build(os.path.join(tmp, "hello"), "./" + os.path.basename(src))
        finally:
            subprocess.run(["rm", "-rf", src])
        build(os.path.join(tmp, "dsh"), "./cmd/dsh")
        floor = [os.path.join(tmp, "hello")]
        dsh = [os.path.join(tmp, "dsh"), "run", "--config", "config.yaml", "-p", "hi"]
        for _ in range(10):
            run(floor), run(dsh)
        f_wall, f_cpu, d_wall, d_cpu = [], [], [], []
        for _ in range(runs):
            w, c = run(floor); f_wall.append(w); f_cpu.append(c)
            w, c = run(dsh); d_wall.append(w); d_cpu.append(c)
    m = statistics.median
    print(f"floor (hello + gRPC): wall {m(f_wall)*1e3:.1f} ms, cpu {m(f_cpu)*1e3:.1f} ms")
    print(f"dsh run -p hi:        wall {m(d_wall)*1e3:.1f} ms, cpu {m(d_cpu)*1e3:.1f} ms")
    print(f"ratio: wall {m(d_wall)/m(f_wall):.2f}, cpu {m(d_cpu)/m(f_cpu):.2f}")

if __name__ == "__main__":
    main()
