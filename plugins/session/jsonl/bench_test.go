package jsonl_test

import (
	stdctx "context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugins/session/jsonl"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
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
			h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
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

// stepsPerTurn is the steps of one turn of BenchmarkSteps: four that call
// the clock tool, then the answer.
const stepsPerTurn = 5

// BenchmarkSteps runs turns of stepsPerTurn steps on 1, 10 and 100 agents
// at once, with and without session.jsonl, and reports persisted steps per
// second and the CPU time (user and system, of the whole process) per
// step. Every step of a tool-calling turn is checkpointed; with sync=group
// the appends of all agents share syncs, with sync=file each syncs alone.
//
//	go test -run '^$' -bench BenchmarkSteps -benchtime 3s ./plugins/session/jsonl/
func BenchmarkSteps(b *testing.B) {
	for _, agents := range []int{1, 10, 100} {
		for _, persist := range []string{"", jsonl.SyncGroup, jsonl.SyncFile} {
			name := "persist=false"
			if persist != "" {
				name = "persist=true/sync=" + persist
			}
			b.Run(fmt.Sprintf("agents=%d/%s", agents, name), func(b *testing.B) {
				benchSteps(b, agents, persist)
			})
		}
	}
}

// benchSteps runs the agents with session.jsonl syncing as persist says,
// or without it when persist is empty.
func benchSteps(b *testing.B, n int, persist string) {
	var yaml strings.Builder
	yaml.WriteString("plugins:\n  - use: llm.scripted\n    config:\n      replies:\n")
	for range stepsPerTurn - 1 {
		yaml.WriteString("        - text: \"a look at the clock. \"\n          tool_calls: [{name: clock, arguments: '{}'}]\n")
	}
	yaml.WriteString("        - text: \"done\"\n  - use: tools.clock\n")
	if persist != "" {
		fmt.Fprintf(&yaml, "  - use: session.jsonl\n    config: {dir: %q, sync: %s}\n", b.TempDir(), persist)
	}
	yaml.WriteString("agents:\n")
	for i := range n {
		fmt.Fprintf(&yaml, "  - id: a%d\n    provider: scripted\n    max_steps: %d\n", i, stepsPerTurn)
		if persist != "" {
			fmt.Fprintf(&yaml, "    session: s%d\n", i)
		}
	}
	cfg, err := config.Parse("bench.yaml", []byte(yaml.String()), config.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	all := make([]agents.Agent, n)
	for i := range all {
		all[i], _ = h.Agent(fmt.Sprintf("a%d", i))
	}
	req := agentcontroller.Request{Mode: agentcontroller.Followup, Content: "what time is it?"}
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		for _, a := range all {
			wg.Go(func() {
				if _, err := h.Controller().Deliver(stdctx.Background(), a, req); err != nil {
					b.Error(err)
				}
				a.WhenIdle(stdctx.Background())
			})
		}
		wg.Wait()
	}
	steps := float64(b.N * n * stepsPerTurn)
	b.ReportMetric(steps/b.Elapsed().Seconds(), "steps/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/steps, "cpu-ns/step")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the user and system time the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
