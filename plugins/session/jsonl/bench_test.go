package jsonl_test

import (
	stdctx "context"
	"fmt"
	"testing"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkTurn is one agent turn (a message in, a scripted answer out)
// with and without session.jsonl, which writes and syncs the turn's events
// at its end.
func BenchmarkTurn(b *testing.B) {
	for _, persist := range []bool{false, true} {
		b.Run(fmt.Sprintf("persist=%v", persist), func(b *testing.B) {
			plugin := ""
			if persist {
				plugin = fmt.Sprintf("  - use: session.jsonl\n    config: {dir: %q}\n", b.TempDir())
			}
			cfg, err := config.Parse("bench.yaml", []byte("plugins:\n  - use: llm.scripted\n"+plugin+"agents:\n  - id: main\n    provider: scripted\n    session: s1\n"), config.LoadOptions{Environ: []string{}})
			if err != nil {
				b.Fatal(err)
			}
			if !persist {
				cfg.Agents[0].Session = ""
			}
			h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(stdctx.Background())
			a, _ := h.Agent("main")
			req := agentcontroller.Request{Mode: agentcontroller.Followup, Content: "hello"}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.Controller().Deliver(stdctx.Background(), a, req); err != nil {
					b.Fatal(err)
				}
				a.WhenIdle(stdctx.Background())
			}
		})
	}
}
