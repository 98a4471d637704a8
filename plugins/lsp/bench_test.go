package lsp

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/plugins/tools/files"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkEditDiagnostics measures what diagnostics add to an edit with
// a warm gopls. Each op edits main.go of a small module, alternating two
// texts that both compile:
//
//   - alone: the edit tool, no lsp plugin;
//   - diagnostics: the same edit with tools.lsp appending new errors
//     (none here: the wait is for gopls's answer, which is the cost);
//   - gopls: gopls's own check: the new text sent to gopls directly
//     (didChange) and its publishDiagnostics awaited, no edit;
//   - gopls-saved: the same with the text written to the disk first, as
//     an edit leaves it: gopls does more for a file whose open text
//     matches the disk (measured: several times the CPU), so this is the
//     floor of an edit's check.
//
// Target: diagnostics ≤ 1.5 × (alone + gopls-saved). cpu-ns/op is this
// process's CPU (dsh's share); gopls-cpu-ns/op is gopls's, from /proc.
func BenchmarkEditDiagnostics(b *testing.B) {
	gopls := goplsForBench(b)
	texts := []string{
		"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(Add(1, 2))\n}\n",
		"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(Add(1, 3))\n}\n",
	}
	edits := []map[string]string{{"old": "Add(1, 2)", "new": "Add(1, 3)"}, {"old": "Add(1, 3)", "new": "Add(1, 2)"}}
	srv := Gopls()
	srv.Command = gopls

	for _, withLSP := range []bool{false, true} {
		name := "alone"
		if withLSP {
			name = "diagnostics"
		}
		b.Run(name, func(b *testing.B) {
			ws := benchModule(b, texts[0])
			root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
			ctxtest.Cleanup(b, root)
			if err := core.Mount(root); err != nil {
				b.Fatal(err)
			}
			mountFor(b, root, files.Plugin, nil)
			if withLSP {
				mountFor(b, root, Plugin, Config{Servers: []Server{srv}, DiagnosticsWait: 10 * time.Second})
			}
			svc, _ := tools.Key.Get(root)
			edit := func(i int) {
				args := map[string]string{"path": "main.go", "old": edits[i%2]["old"], "new": edits[i%2]["new"]}
				raw, _ := json.Marshal(args)
				r, err := svc.Execute(stdctx.Background(), root, tools.Call{ID: "b", Name: "edit", Arguments: raw, Workspace: ws})
				if err != nil || r.IsError || strings.Contains(r.Content, "[lsp") {
					b.Fatalf("edit %d: %v %s", i, err, r.Content)
				}
			}
			for i := range 10 { // warm: gopls started, the module loaded
				edit(i)
			}
			pid := goplsPid(b)
			b.ReportAllocs()
			cpu, gcpu := cpuSelf(b), cpuOf(pid)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				edit(i + 10)
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuSelf(b)-cpu)/float64(b.N), "cpu-ns/op")
			if pid > 0 {
				b.ReportMetric(float64(cpuOf(pid)-gcpu)/float64(b.N), "gopls-cpu-ns/op")
			}
		})
	}

	for _, saved := range []bool{false, true} {
		name := "gopls"
		if saved {
			name = "gopls-saved"
		}
		b.Run(name, func(b *testing.B) { goplsCheck(b, srv, gopls, texts, saved) })
	}
}

// goplsCheck is the floor: the new text sent to gopls directly and its
// diagnostics awaited. saved writes the text to the disk first, as an
// edit does: gopls works more on a file whose open text is the disk's.
func goplsCheck(b *testing.B, srv Server, gopls string, texts []string, saved bool) {
	{
		ws := benchModule(b, texts[0])
		ctx := stdctx.Background()
		c, err := start(ctx, srv, gopls, ws)
		if err != nil {
			b.Fatal(err)
		}
		defer c.close()
		file := filepath.Join(ws, "main.go")
		check := func(i int) {
			if saved {
				if err := os.WriteFile(file, []byte(texts[i%2]), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			mark := c.mark()
			u, v, _, err := c.open(ctx, file, texts[i%2])
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := c.diagnostics(ctx, u, v, mark, 10*time.Second); !ok {
				b.Fatal("gopls sent no diagnostics")
			}
		}
		for i := range 10 {
			check(i)
		}
		pid := c.proc.Pid()
		b.ReportAllocs()
		cpu, gcpu := cpuSelf(b), cpuOf(pid)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			check(i + 10)
		}
		b.StopTimer()
		b.ReportMetric(float64(cpuSelf(b)-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(cpuOf(pid)-gcpu)/float64(b.N), "gopls-cpu-ns/op")
	}
}

func mountFor(b *testing.B, root *dshctx.Context, p dshctx.Plugin, cfg any) {
	b.Helper()
	f, err := root.Plugin(p, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Await(stdctx.Background()); err != nil {
		b.Fatal(err)
	}
}

func goplsForBench(b *testing.B) string {
	if p, err := exec.LookPath("gopls"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "gopls")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	b.Fatal("gopls is not installed: run go install golang.org/x/tools/gopls@v0.23.0")
	return ""
}

func benchModule(b *testing.B, main string) string {
	ws := b.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module example.com/m\n\ngo 1.22\n",
		"calc.go": "package main\n\nfunc Add(a, b int) int { return a + b }\n",
		"main.go": main,
	} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return ws
}

// goplsPid is the gopls this process started last, or 0.
func goplsPid(b *testing.B) int {
	ents, _ := os.ReadDir("/proc")
	last := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 || !strings.Contains(string(stat[:i]), "(gopls") {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && pid > last {
			last = pid
		}
	}
	return last
}

func cpuSelf(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuOf is a process's user and system time, from /proc (clock ticks of
// 10 ms: meaningful over many ops).
func cpuOf(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	// After the comm: state is field 0, utime 11, stime 12.
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
