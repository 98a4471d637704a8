package budget_test

import (
	stdctx "context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugins/budget"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/usage"
)

// cpuTime is the process's user+system time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchLimits are four limits a prompt falls under: tokens and cost of
// its principal, prompts per hour of its principal and of its tenant.
// Concurrent turns are left out: a slot is freed by the end of the turn,
// and the benchmark's agent runs none.
func benchLimits() budget.Config {
	cfg := budget.Config{}.Defaults().WithPricing(usage.Pricing{Models: map[string]usage.Price{"m": {Input: 1, Output: 2}}})
	cfg.Limits = []budget.Limit{
		{Name: "tokens", Per: budget.PerPrincipal, Window: 24 * time.Hour, Tokens: 1 << 40, Cost: 1e9},
		{Name: "prompts", Per: budget.PerPrincipal, Window: time.Hour, Prompts: 1 << 40},
		{Name: "tenant", Per: budget.PerTenant, Window: time.Hour, Prompts: 1 << 40},
	}
	return cfg
}

// BenchmarkAdmission delivers prompts to one agent through the admission
// stage: with no plugin (the floor), with the budget's counters in
// memory, and in a JetStream bucket of one embedded server. It reports
// wall and CPU time per prompt (cpu-ns/op: the process's, the embedded
// server's included).
func BenchmarkAdmission(b *testing.B) {
	run := func(b *testing.B, cfg *budget.Config) {
		e := testkit.New(b)
		if cfg != nil {
			e.Apply(budget.Plugin, *cfg)
		}
		a := e.Agent("main@s1")
		req := testkit.Send("hello")
		req.Source.Principal = agentcontroller.Principal{Kind: "user", ID: "ann", Tenant: "acme"}
		ctx := stdctx.Background()
		b.ReportAllocs()
		cpu := cpuTime(b)
		n := 0
		for b.Loop() {
			if _, err := e.Controller.Deliver(ctx, a, req); err != nil {
				b.Fatal(err)
			}
			if n++; n%1000 == 0 {
				a.Take()
			}
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(n), "cpu-ns/op")
	}
	b.Run("floor=none", func(b *testing.B) { run(b, nil) })
	b.Run("budget=memory", func(b *testing.B) {
		cfg := benchLimits()
		run(b, &cfg)
	})
	b.Run("budget=nats", func(b *testing.B) {
		cfg := benchLimits()
		cfg.Store = budget.StoreNATS
		cfg.NATS.URL = natstest.Single(b).ClientURL()
		cfg.NATS.Bucket = fmt.Sprintf("B%d", time.Now().UnixNano())
		run(b, &cfg)
	})
}
