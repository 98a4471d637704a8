package celpolicy_test

import (
	stdctx "context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugins/policy/celpolicy"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// counter is an agent whose inbox only counts, so the benchmark measures
// delivery and admission and nothing else.
type counter struct {
	id    string
	scope *dshctx.Context
	n     atomic.Int64
}

func (c *counter) ID() string                    { return c.id }
func (c *counter) Status() agents.Status         { return agents.StatusIdle }
func (c *counter) Session() *session.Session     { return nil }
func (c *counter) Context() *dshctx.Context      { return c.scope }
func (c *counter) Abort()                        {}
func (c *counter) Cancel(error)                  {}
func (c *counter) WhenIdle(stdctx.Context) error { return nil }
func (c *counter) Followup(llm.Message) error    { c.n.Add(1); return nil }
func (c *counter) Steer(llm.Message) error       { c.n.Add(1); return nil }
func (c *counter) Pending() int                  { return 0 }

// tenRules are ten admission rules of the kinds docs/policy.md shows; none
// matches the benchmark's message, so every message runs all ten.
var tenRules = []celpolicy.Rule{
	{Name: "r1", When: `source.entry == "webhook" && request.content.contains("deploy")`, Action: "refuse"},
	{Name: "r2", When: `source.principal.kind == ""`, Action: "refuse"},
	{Name: "r3", When: `source.principal.tenant in params.blocked_tenants`, Action: "refuse"},
	{Name: "r4", When: `request.attachments.size() > 5`, Action: "refuse"},
	{Name: "r5", When: `request.content.size() > 100000`, Action: "refuse"},
	{Name: "r6", When: `source.principal.id in params.banned`, Action: "refuse"},
	{Name: "r7", When: `source.entry == "schedule" && request.mode == "steer"`, Action: "refuse"},
	{Name: "r8", When: `source.on_behalf_of.id == "mallory"`, Action: "refuse"},
	{Name: "r9", When: `request.agent == "prod" && source.principal.kind != "jwt"`, Action: "refuse"},
	{Name: "r10", When: `source.unattended && request.content.startsWith("rm ")`, Action: "refuse"},
}

// BenchmarkAdmission delivers one message at a time to one agent through
// the agent controller, with no policy and with a 10-rule policy.cel: the
// difference is what the policy adds per message. cpu-ns/op is the
// process's CPU time (user+system) per delivery.
func BenchmarkAdmission(b *testing.B) {
	for _, c := range []struct {
		name  string
		rules []celpolicy.Rule
	}{{"none", nil}, {"cel-10-rules", tenRules}} {
		b.Run(c.name, func(b *testing.B) {
			e := testkit.New(b)
			if c.rules != nil {
				e.Apply(celpolicy.Plugin, celpolicy.Config{Admission: c.rules, Params: map[string]any{
					"blocked_tenants": []any{"evil-corp"}, "banned": []any{"mallory", "trudy"}}})
			}
			scope, _ := e.Root.Scoped("a")
			a := &counter{id: "a", scope: scope}
			e.Registry.Reserve(a.id)
			e.Registry.Publish(a)
			req := testkit.Send("please summarise the open issues")
			req.Source = agentcontroller.Source{Kind: agentcontroller.SourceUser, Entry: "serve",
				Principal: agentcontroller.Principal{Kind: "token", ID: "alice", Tenant: "acme"}}
			ctx := stdctx.Background()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := e.Controller.Deliver(ctx, a, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			if a.n.Load() != int64(b.N) {
				b.Fatalf("%d delivered of %d", a.n.Load(), b.N)
			}
		})
	}
}

// BenchmarkAdmissionDispatch is the admission stage alone, as the
// controller dispatches it for each message, with no policy and with the
// ten rules: no goroutine hand-off, so the wall time is the policy's.
func BenchmarkAdmissionDispatch(b *testing.B) {
	for _, c := range []struct {
		name  string
		rules []celpolicy.Rule
	}{{"none", nil}, {"cel-10-rules", tenRules}} {
		b.Run(c.name, func(b *testing.B) {
			e := testkit.New(b)
			if c.rules != nil {
				e.Apply(celpolicy.Plugin, celpolicy.Config{Admission: c.rules, Params: map[string]any{
					"blocked_tenants": []any{"evil-corp"}, "banned": []any{"mallory", "trudy"}}})
			}
			scope, _ := e.Root.Scoped("a")
			a := &counter{id: "a", scope: scope}
			adm := agentcontroller.Admission{Agent: a, Mode: agentcontroller.Followup,
				Message: llm.Message{Role: llm.RoleUser, Content: "please summarise the open issues"},
				Source: agentcontroller.Source{Kind: agentcontroller.SourceUser, Entry: "serve",
					Principal: agentcontroller.Principal{Kind: "token", ID: "alice", Tenant: "acme"}}}
			ctx := stdctx.Background()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				d, err := agentcontroller.EventAdmission.Dispatch(ctx, scope, adm)
				if err != nil || d.Kind != agentcontroller.DecisionAdmit {
					b.Fatal(d, err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
