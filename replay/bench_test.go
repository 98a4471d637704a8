package replay_test

import (
	stdctx "context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/replay"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// benchConfig is a scripted agent that makes a clock call per step for
// nine steps and then answers, judged by a tools.permission rule.
func benchConfig(b *testing.B, steps int) *config.Config {
	b.Helper()
	var replies strings.Builder
	for range steps - 1 {
		replies.WriteString("        - {text: \"step\", tool_calls: [{name: clock, arguments: '{\"timezone\": \"UTC\"}'}]}\n")
	}
	replies.WriteString("        - {text: done}\n")
	text := "plugins:\n  - use: llm.scripted\n    config:\n      replies:\n" + replies.String() +
		"  - use: tools.clock\n  - use: tools.permission\n    config: {rules: [{tool: clock, decision: allow}]}\n" +
		"agents:\n  - id: main\n    provider: scripted\nlog: {level: error}\n"
	cfg, err := config.Parse("bench.yaml", []byte(text), config.LoadOptions{IgnoreEnv: true})
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// runLive runs one turn of a fresh session through h and returns its log.
func runLive(ctx stdctx.Context, b *testing.B, h *host.Host, id string) []session.Event {
	svc := h.Sessions()
	if _, err := svc.Ensure(ctx, sessions.EnsureOptions{Mode: sessions.EnsureCreate, OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: id, KeepRunning: true}}); err != nil {
		b.Fatal(err)
	}
	t, err := svc.Prompt(ctx, id, sessions.PromptRequest{RequestID: "r-" + id, Content: "go"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := t.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	events, err := svc.History(ctx, id, 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.Close(ctx, id); err != nil {
		b.Fatal(err)
	}
	return events
}

// BenchmarkReplay measures replay throughput in recorded steps per
// second (a 10-step turn with a tool call a step), against the floor of
// running the same turn live with the scripted model, in the same run.
func BenchmarkReplay(b *testing.B) {
	const steps = 10
	ctx := stdctx.Background()
	cfg := benchConfig(b, steps)
	live, err := host.Start(cfg, host.Options{LogOutput: os.Stderr})
	if err != nil {
		b.Fatal(err)
	}
	defer live.Close(ctx)
	events := runLive(ctx, b, live, "recorded")

	b.Run("live", func(b *testing.B) {
		b.ReportAllocs()
		start, cpu := time.Now(), cpuTime()
		for i := range b.N {
			runLive(ctx, b, live, fmt.Sprintf("live-%d", i))
		}
		report(b, steps, start, cpu)
	})
	b.Run("replay", func(b *testing.B) {
		h, err := host.Start(replay.Config(cfg), host.Options{LogOutput: os.Stderr})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close(ctx)
		r, err := replay.New(h)
		if err != nil {
			b.Fatal(err)
		}
		rec := replay.Recording{Session: "recorded", Agent: "main", Events: events}
		b.ReportAllocs()
		b.ResetTimer()
		start, cpu := time.Now(), cpuTime()
		for range b.N {
			rep, err := r.Replay(ctx, rec)
			if err != nil || rep.Changed() || rep.Steps != steps {
				b.Fatalf("replay: %+v %v", rep, err)
			}
		}
		report(b, steps, start, cpu)
	})
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds steps per second of wall time and CPU time per step.
func report(b *testing.B, steps int, start time.Time, cpu time.Duration) {
	n := float64(b.N * steps)
	b.ReportMetric(n/time.Since(start).Seconds(), "steps/s")
	b.ReportMetric(float64(cpuTime()-cpu)/n, "cpu-ns/step")
}
