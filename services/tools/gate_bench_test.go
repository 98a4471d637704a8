package tools_test

import (
	stdctx "context"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/tools"
)

func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lettingGate is plan mode's gate on a read-only call: it asks the tool
// whether it reads and lets it through.
type lettingGate struct{}

func (lettingGate) Refuse(_ stdctx.Context, call tools.Call, t *tools.Tool) (string, string) {
	if ok, why := tools.IsReadOnly(t, call); !ok {
		return why, "bench"
	}
	return "", ""
}

// BenchmarkGate is what a gate (plan mode) adds to every call: "none" is
// the pipeline without one, the floor; "read-only" has a gate that checks
// the tool and lets the call through.
func BenchmarkGate(b *testing.B) {
	for _, c := range []struct {
		name string
		gate bool
	}{{"none", false}, {"read-only", true}} {
		b.Run(c.name, func(b *testing.B) {
			root := newRoot(b)
			if c.gate {
				if err := tools.GateKey.Provide(root, tools.Gate(lettingGate{})); err != nil {
					b.Fatal(err)
				}
			}
			s := tools.New()
			if err := s.Register(root, tools.Tool{Name: "read", ReadOnly: true, Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
				return tools.Result{}, nil
			}}); err != nil {
				b.Fatal(err)
			}
			call := tools.Call{Name: "read", Arguments: []byte(`{"path":"src/main.go"}`)}
			ctx := stdctx.Background()
			b.ReportAllocs()
			cpu := cpuNow(b)
			for b.Loop() {
				if r, err := s.Execute(ctx, root, call); err != nil || r.IsError {
					b.Fatal(r, err)
				}
			}
			b.ReportMetric(float64(cpuNow(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
