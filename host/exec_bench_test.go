package host_test

import (
	stdctx "context"
	"slices"
	"sync"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

func benchHost(b *testing.B) (*host.Host, agentcontroller.Admission, *dshctx.Context) {
	bin, _ := binaries(&testing.T{})
	cfg, err := host.Parse("bench.yaml", []byte(execConfig(bin, "{}", "")), host.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(stdctx.Background()) })
	a, _ := h.Agent("main")
	return h, agentcontroller.Admission{Agent: a, Message: llm.Message{Role: llm.RoleUser, Content: "hi"}, Mode: agentcontroller.Followup}, a.Context()
}

// BenchmarkPluginCall dispatches the admission waterfall through one plugin
// listener that calls next, and a bare gRPC unary call (Describe) on the
// same connection for comparison.
func BenchmarkPluginCall(b *testing.B) {
	h, adm, at := benchHost(b)
	rpc := host.PluginRPC(h, "guard")
	b.Run("waterfall-with-next", func(b *testing.B) {
		lat := make([]time.Duration, 0, 1<<16)
		for b.Loop() {
			t0 := time.Now()
			d, err := agentcontroller.EventAdmission.Dispatch(stdctx.Background(), at, adm)
			if err != nil || d.Kind != agentcontroller.DecisionAdmit {
				b.Fatal(d, err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportP50(b, lat)
	})
	b.Run("bare-unary", func(b *testing.B) {
		lat := make([]time.Duration, 0, 1<<16)
		for b.Loop() {
			t0 := time.Now()
			if _, err := rpc.Describe(stdctx.Background(), &pluginv1.DescribeRequest{}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportP50(b, lat)
	})
}

func reportP50(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
}

// BenchmarkPluginConcurrent runs 1,000 calls at a time through one plugin.
func BenchmarkPluginConcurrent(b *testing.B) {
	_, adm, at := benchHost(b)
	const inFlight = 1000
	calls := 0
	start := time.Now()
	for b.Loop() {
		var wg sync.WaitGroup
		for range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := agentcontroller.EventAdmission.Dispatch(stdctx.Background(), at, adm); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		calls += inFlight
	}
	b.ReportMetric(float64(calls)/time.Since(start).Seconds(), "calls/s")
}

// BenchmarkPluginStart measures a plugin process from exec to ready: the
// handshake, Describe and Configure, and its listener registered.
func BenchmarkPluginStart(b *testing.B) {
	bin, _ := binaries(&testing.T{})
	cfg, err := host.Parse("bench.yaml", []byte(execConfig(bin, "{}", "")), host.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	base, err := host.Parse("bench.yaml", []byte("plugins:\n  - use: llm.scripted\nagents:\n  - id: main\n    provider: scripted\n"), host.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	var with, without time.Duration
	for b.Loop() {
		for _, c := range []*host.Config{cfg, base} {
			t0 := time.Now()
			h, err := host.Start(c, host.Options{Logger: hclog.NewNullLogger()})
			if err != nil {
				b.Fatal(err)
			}
			if c == cfg {
				with += time.Since(t0)
			} else {
				without += time.Since(t0)
			}
			h.Close(stdctx.Background())
		}
	}
	b.ReportMetric(float64((with-without).Microseconds())/float64(b.N)/1000, "ms-exec-to-ready")
}
