package agentloop_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/usage"
	"github.com/dsh-go/dsh/waterfall"
)

var stepUsage = llm.Usage{InputTokens: 1000, CacheHitTokens: 900, CacheMissTokens: 100, OutputTokens: 20, ReasoningTokens: 5}

func withModel(t testing.TB, e *env, id, model string) agents.Agent {
	t.Helper()
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: id, Options: agents.Options{Provider: "scripted", Model: model}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Dispose(stdctx.Background()) })
	return h.Agent
}

// TestStepRecordsUsageProviderAndModel: the assistant/message of a step
// carries the provider's usage and what the request named, so the log
// alone prices the session.
func TestStepRecordsUsageProviderAndModel(t *testing.T) {
	u := stepUsage
	e := newEnv(t, []scripted.Reply{{Text: "hi", Usage: &u}}, agentloop.Config{})
	a := withModel(t, e, "a", "demo")
	runTurn(t, a)
	var found bool
	for _, ev := range a.Session().Events(0) {
		if ev.Type == session.AssistantMessage {
			found = true
			if ev.Usage == nil || *ev.Usage != stepUsage || ev.Provider != "scripted" || ev.Model != "demo" {
				t.Fatalf("event %+v usage %+v", ev, ev.Usage)
			}
		}
	}
	if !found {
		t.Fatal("no assistant/message")
	}
}

// TestTrackerReadsTheLogThenFollows: a tracker started on a session that
// already has turns (as a resumed one does) counts them, then the new ones.
func TestTrackerReadsTheLogThenFollows(t *testing.T) {
	u := stepUsage
	e := newEnv(t, []scripted.Reply{{Text: "hi", Usage: &u}}, agentloop.Config{})
	a := withModel(t, e, "a", "demo")
	runTurn(t, a)
	pricing := usage.Pricing{Models: map[string]usage.Price{"demo": {Input: 1, Output: 10}}}
	tr, err := usage.Track(a.Context(), a.Session(), usage.NewAccount(pricing, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Stop()
	if s := tr.Snapshot(); s.Session.Steps != 1 || s.Session.InputTokens != 1000 {
		t.Fatalf("after the log: %+v", s.Session)
	}
	runTurn(t, a)
	s := tr.Snapshot()
	if s.Session.Steps != 2 || s.Session.CacheHitTokens != 1800 || s.Turn == nil || s.Turn.Turn != 2 || s.Turn.Steps != 1 {
		t.Fatalf("after a new turn: %+v %+v", s.Session, s.Turn)
	}
	// Per step: 100 misses and 900 hits at 1, 20 output at 10.
	if s.Session.Cost == nil || *s.Session.Cost != 2*(1000*1+20*10)/1e6 {
		t.Fatalf("cost %v", s.Session.Cost)
	}
}

// BenchmarkStepUsage is BenchmarkStep with and without a usage tracker
// following the session: the cost of live accounting per step.
func BenchmarkStepUsage(b *testing.B) {
	for _, tracked := range []bool{false, true} {
		name := "without"
		if tracked {
			name = "with-tracker"
		}
		b.Run(name, func(b *testing.B) {
			const steps = 100
			u := stepUsage
			e := newEnv(b, []scripted.Reply{{Text: "Sure, here is a short answer.", Usage: &u}}, agentloop.Config{MaxSteps: steps})
			agentloop.EventContinuation.On(e.root, func(_ stdctx.Context, c agentloop.Continuation, _ waterfall.Next[agentloop.Continuation, bool]) (bool, error) {
				return c.Step < steps, nil
			})
			a := withModel(b, e, "a", "demo")
			if tracked {
				pricing := usage.Pricing{Models: map[string]usage.Price{"demo": {Input: 0.27, Output: 1.1}}}
				tr, err := usage.Track(a.Context(), a.Session(), usage.NewAccount(pricing, nil))
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Stop()
			}
			b.ReportAllocs()
			for b.Loop() {
				runTurn(b, a)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
			b.ReportMetric(0, "ns/op")
		})
	}
}
