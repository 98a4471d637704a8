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
// texts that both compile, three ways, interleaved so that the load of a
// shared machine falls on all three alike:
//
//   - alone: the edit tool, no lsp plugin (its own module);
//   - check: gopls's own check of such an edit, the floor: the text
//     written to the disk and sent to a gopls of its own (didChange), its
//     publishDiagnostics awaited, no dsh tool in between. gopls does
//     several times more for a file whose open text matches the disk
//     than for an unsaved one, and an edit always leaves it so;
//   - diagnostics: the edit with tools.lsp appending new errors (none
//     here: the wait for gopls's answer is the cost).
//
// Metrics are milliseconds per op of each (wall), this process's CPU for
// each (dsh's share), each gopls's CPU from /proc, and ratio =
// diagnostics / (alone + check). Target: ratio ≤ 1.5.
func BenchmarkEditDiagnostics(b *testing.B) {
	gopls := goplsForBench(b)
	texts := []string{
		"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(Add(1, 2))\n}\n",
		"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(Add(1, 3))\n}\n",
	}
	edits := [][2]string{{"Add(1, 2)", "Add(1, 3)"}, {"Add(1, 3)", "Add(1, 2)"}}
	srv := Gopls()
	srv.Command = gopls
	ctx := stdctx.Background()

	// The floor's own gopls.
	wsCheck := benchModule(b, texts[0])
	c, err := start(ctx, srv, gopls, wsCheck)
	if err != nil {
		b.Fatal(err)
	}
	defer c.close()
	file := filepath.Join(wsCheck, "main.go")
	check := func(i int) {
		if err := os.WriteFile(file, []byte(texts[i%2]), 0o644); err != nil {
			b.Fatal(err)
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

	editor := func(withLSP bool) func(int) {
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
		return func(i int) {
			raw, _ := json.Marshal(map[string]string{"path": "main.go", "old": edits[i%2][0], "new": edits[i%2][1]})
			r, err := svc.Execute(ctx, root, tools.Call{ID: "b", Name: "edit", Arguments: raw, Workspace: ws})
			if err != nil || r.IsError || strings.Contains(r.Content, "[lsp") || strings.Contains(r.Content, "gopls") {
				b.Fatalf("edit %d: %v %s", i, err, r.Content)
			}
		}
	}
	alone, diagnostics := editor(false), editor(true)

	for i := range 10 { // warm: both gopls started, their modules loaded
		alone(i)
		check(i)
		diagnostics(i)
	}
	checkPid := c.proc.Pid()
	diagPid := 0
	for _, pid := range goplsPids() {
		if pid != checkPid {
			diagPid = pid
		}
	}
	type phase struct {
		run      func(int)
		goplsPid int
		wall     time.Duration
		cpu      time.Duration
		gopls    time.Duration
	}
	phases := []*phase{{run: alone}, {run: check, goplsPid: checkPid}, {run: diagnostics, goplsPid: diagPid}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, ph := range phases {
			g, cpu, t := cpuOf(ph.goplsPid), cpuSelf(b), time.Now()
			ph.run(i + 10)
			ph.wall += time.Since(t)
			ph.cpu += cpuSelf(b) - cpu
			ph.gopls += cpuOf(ph.goplsPid) - g
		}
	}
	b.StopTimer()
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d) / n / 1e6 }
	for name, ph := range map[string]*phase{"alone": phases[0], "check": phases[1], "diag": phases[2]} {
		b.ReportMetric(ms(ph.wall), name+"-ms/op")
		b.ReportMetric(ms(ph.cpu), name+"-cpu-ms/op")
		if ph.goplsPid > 0 {
			b.ReportMetric(ms(ph.gopls), name+"-gopls-cpu-ms/op")
		}
	}
	b.ReportMetric(float64(phases[2].wall)/float64(phases[0].wall+phases[1].wall), "ratio")
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

// goplsPids lists the gopls processes this process started.
func goplsPids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
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
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, pid)
		}
	}
	return out
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
