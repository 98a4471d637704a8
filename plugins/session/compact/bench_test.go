package compact_test

import (
	stdctx "context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugins/session/compact"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkLongSession runs a 2,000-turn session on the scripted model
// (echo replies, simulated usage), without compaction and with it at two
// windows, and reports the figures of issue 17: the heap the host holds at
// the end, the prompt of the last request, the time spent compacting and
// the share of input tokens served from the simulated prompt cache. Run it
// once: go test ./plugins/session/compact -run '^$' -bench LongSession -benchtime 1x
func BenchmarkLongSession(b *testing.B) {
	const turns = 2000
	for _, c := range []struct {
		name, plugin string
	}{
		{"off", ""},
		{"window-128k", "  - use: session.compact\n"},
		{"window-32k", "  - use: session.compact\n    config: {window: 32000}\n"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				longSession(b, turns, c.plugin)
			}
		})
	}
}

func longSession(b *testing.B, turns int, plugin string) {
	yaml := "plugins:\n  - use: llm.scripted\n    config: {simulate_usage: true}\n" + plugin +
		"agents:\n  - id: main\n    provider: scripted\n"
	cfg, err := config.Parse("bench.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	var spent time.Duration
	n := 0
	if _, err := compact.EventDone.On(h.Root(), func(_ stdctx.Context, d compact.Done) error {
		spent += d.Elapsed
		n++
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	a, _ := h.Agent("main")
	start := time.Now()
	for i := range turns {
		// About 50 tokens a prompt and as much again for the echo.
		text := fmt.Sprintf("turn %d: %s", i, strings.Repeat("lorem ipsum ", 16))
		if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: text}); err != nil {
			b.Fatal(err)
		}
		if err := a.WhenIdle(stdctx.Background()); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	var last llm.Usage
	var in, hit int
	for _, e := range a.Session().Events(1) {
		if e.Type == session.AssistantMessage && e.Usage != nil {
			last = *e.Usage
			in += e.Usage.InputTokens
			hit += e.Usage.CacheHitTokens
		}
	}
	hist := a.Session().History()
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(last.InputTokens), "last-prompt-tokens")
	b.ReportMetric(float64(hist.Len()), "history-msgs")
	b.ReportMetric(float64(a.Session().Len()), "log-events")
	b.ReportMetric(float64(n), "compactions")
	b.ReportMetric(float64(spent.Microseconds())/1000, "compact-ms")
	b.ReportMetric(float64(elapsed.Milliseconds()), "run-ms")
	b.ReportMetric(100*float64(hit)/float64(max(in, 1)), "cache-hit-%")
}
