#!/usr/bin/env python3
"""Cold start of `dsh run -p hi` against its floor, a hello world that links
gRPC and the plugin protocol's generated code, both release builds.

Runs the two alternately (after warm-ups) and prints the median wall time
and CPU time (user + system, from getrusage) of each, and their ratio.
Usage, from the repository root: python3 scripts/coldstart.py [runs]

Two more programs run in the same rounds, to say where the rest goes:
the same floor plus the Markdown stack the terminal and the web page render
with (glamour, chroma's lexers and styles, goldmark, bluemonday), and a
program that links every package cmd/dsh imports and does nothing, which is
what no change to dsh's own code can get under.
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
MARKDOWN = HELLO.replace('''	_ "google.golang.org/grpc"
''', '''	_ "github.com/alecthomas/chroma/v2/lexers"
	_ "github.com/alecthomas/chroma/v2/styles"
	_ "github.com/charmbracelet/glamour"
	_ "github.com/microcosm-cc/bluemonday"
	_ "github.com/yuin/goldmark/extension"
	_ "google.golang.org/grpc"
''')

def link_all():
    """A main that imports what cmd/dsh imports and does nothing."""
    out = subprocess.run(["go", "list", "-f", "{{join .Imports \"\\n\"}}", "./cmd/dsh"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    imports = "".join(f'\t_ "{p}"\n' for p in out.split() if p != "C")
    return f"package main\n\nimport (\n{imports})\n\nfunc main() {{ println(\"hi\") }}\n"

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
        # The floors must live inside the module to import its packages.
        for name, text in (("hello", HELLO), ("markdown", MARKDOWN), ("linkall", link_all())):
            src = tempfile.mkdtemp(prefix=".coldstart-", dir=ROOT)
            try:
                with open(os.path.join(src, "main.go"), "w") as f:
                    f.write(text)
                build(os.path.join(tmp, name), "./" + os.path.basename(src))
            finally:
                subprocess.run(["rm", "-rf", src])
        build(os.path.join(tmp, "dsh"), "./cmd/dsh")
        progs = {
            "floor (hello + gRPC)": [os.path.join(tmp, "hello")],
            "floor + Markdown stack": [os.path.join(tmp, "markdown")],
            "links what dsh links": [os.path.join(tmp, "linkall")],
            "dsh run -p hi": [os.path.join(tmp, "dsh"), "run", "--config", "config.yaml", "-p", "hi"],
        }
        for _ in range(10):
            for cmd in progs.values():
                run(cmd)
        wall = {k: [] for k in progs}
        cpu = {k: [] for k in progs}
        for _ in range(runs):
            for k, cmd in progs.items():
                w, c = run(cmd); wall[k].append(w); cpu[k].append(c)
    m = statistics.median
    fw, fc = m(wall["floor (hello + gRPC)"]), m(cpu["floor (hello + gRPC)"])
    for k in progs:
        w, c = m(wall[k]), m(cpu[k])
        print(f"{k + ':':24s} wall {w*1e3:5.1f} ms, cpu {c*1e3:5.1f} ms; ratio to the floor wall {w/fw:.2f}, cpu {c/fc:.2f}")

if __name__ == "__main__":
    main()
