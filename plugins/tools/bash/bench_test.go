//go:build linux

package bash_test

import (
	stdctx "context"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/sandbox"
	"github.com/dsh-go/dsh/plugins/tools/bash"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkTrue is the cost of one `true` through the tool: process start,
// teardown and, in the sandbox, entering it; the floor is the same command
// started plainly from Go, in the same run. Besides wall time per op it
// reports the CPU the children used (user + system, from getrusage).
func BenchmarkTrue(b *testing.B) {
	b.Run("floor", func(b *testing.B) {
		measureCPU(b, func() {
			if err := exec.Command("/bin/bash", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		})
	})
	for _, mode := range []string{bash.ModeOff, bash.ModeLandlock} {
		b.Run(mode, func(b *testing.B) {
			if st := sandbox.Probe(); mode == bash.ModeLandlock && (!st.Available() || !st.Namespaces) {
				b.Skipf("no sandbox on this kernel: %s", st)
			}
			root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
			defer root.Dispose(stdctx.Background())
			cfg := bash.Config{}.Defaults()
			cfg.Sandbox.Mode = mode
			for _, p := range []struct {
				p dshctx.Plugin
				c any
			}{{tools.Plugin, nil}, {protect.Plugin, nil}, {bash.Plugin, cfg}} {
				f, _ := root.Plugin(p.p, p.c)
				if err := f.Await(stdctx.Background()); err != nil {
					b.Fatal(err)
				}
			}
			// Approval is not what is measured; nobody is attached to ask.
			tools.EventApprove.On(root, func(stdctx.Context, tools.Approval, tools.ApproveNext) (tools.Verdict, error) {
				return tools.Verdict{Decision: tools.Allow}, nil
			})
			svc, _ := tools.Key.Get(root)
			call := tools.Call{Name: "bash", Arguments: json.RawMessage(`{"command":"true"}`), Workspace: b.TempDir()}
			measureCPU(b, func() {
				if r, err := svc.Execute(stdctx.Background(), root, call); err != nil || r.IsError {
					b.Fatal(r, err)
				}
			})
		})
	}
}

func measureCPU(b *testing.B, op func()) {
	b.ReportAllocs()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before)
	n := 0
	for b.Loop() {
		op()
		n++
	}
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu)/float64(n)/1e6, "cpu-ms/op")
}

// BenchmarkJob is the cost of a background job's whole life through the
// tools: bash with background: true answering at once, then job_output
// waiting for its end, for `echo hi`; the floor is the same command run
// in the foreground by the bash tool, in the same run (sandbox off: the
// sandbox's cost is BenchmarkTrue's).
func BenchmarkJob(b *testing.B) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	cfg := bash.Config{}.Defaults()
	cfg.Sandbox.Mode = bash.ModeOff
	cfg.Jobs.Enabled = true
	for _, p := range []struct {
		p dshctx.Plugin
		c any
	}{{tools.Plugin, nil}, {protect.Plugin, nil}, {bash.Plugin, cfg}} {
		f, _ := root.Plugin(p.p, p.c)
		if err := f.Await(stdctx.Background()); err != nil {
			b.Fatal(err)
		}
	}
	tools.EventApprove.On(root, func(stdctx.Context, tools.Approval, tools.ApproveNext) (tools.Verdict, error) {
		return tools.Verdict{Decision: tools.Allow}, nil
	})
	svc, _ := tools.Key.Get(root)
	ws := b.TempDir()
	run := func(name, args string) string {
		r, err := svc.Execute(stdctx.Background(), root, tools.Call{Name: name, Arguments: json.RawMessage(args), Workspace: ws})
		if err != nil || r.IsError {
			b.Fatal(r, err)
		}
		return r.Content
	}
	b.Run("foreground", func(b *testing.B) {
		measureCPU(b, func() { run("bash", `{"command":"echo hi"}`) })
	})
	b.Run("job", func(b *testing.B) {
		measureCPU(b, func() {
			out := run("bash", `{"command":"echo hi","background":true}`)
			id, _, _ := strings.Cut(strings.TrimPrefix(out, "started "), " ")
			for !strings.Contains(run("job_output", `{"id":"`+id+`","wait":60}`), " ended: ") {
			}
		})
	})
}
