package backendtest

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// recorder is the part of the loop's agent that takes the outcome events
// and decision records the admission stage hands over.
type recorder interface {
	RecordEvent(session.Event) error
	RecordDecision(session.Decision) error
}

// outcomesOfAClosedFreshSession: a fresh session whose only events are
// refusals — one handed over while its agent was idle, one as its close
// began (a webhook's own session is closed right after its delivery is
// refused) — holds both, each after its decision record, once another
// process resumes it: a redelivery there is answered from them.
func outcomesOfAClosedFreshSession(t *testing.T, f Fixture) {
	a := f.mount(t)
	h, err := a.registry.Create(bg, agents.CreateOptions{AgentID: "main", SessionID: "s1", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := h.Agent.(recorder)
	if !ok {
		t.Fatal("the loop's agent takes no handed-over records")
	}
	refuse := func(rid string) {
		t.Helper()
		if err := rec.RecordDecision(session.Decision{Stage: session.StageAdmission, Verdict: "refuse", Reason: "test/no", RequestID: rid, MessageID: "m-" + rid}); err != nil {
			t.Error(err)
		}
		if err := rec.RecordEvent(session.Event{Type: session.MessageRefused, RequestID: rid, Reason: "test/no", Error: "not now",
			Message: &llm.Message{ID: "m-" + rid, Role: llm.RoleUser, Content: "no"}}); err != nil {
			t.Error(err)
		}
	}
	refuse("r1")
	agents.EventStatus.On(a.root, func(_ stdctx.Context, c agents.StatusChange) error {
		if c.To == agents.StatusDisposed {
			refuse("r2")
		}
		return nil
	})
	if err := h.Dispose(bg); err != nil {
		t.Fatal(err)
	}
	a.close(t)

	b := f.mount(t)
	h, err = b.registry.Resume(bg, agents.ResumeOptions{AgentID: "main", ResumeSessionID: "s1", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Dispose(bg)
	log := h.Agent.Session()
	for _, rid := range []string{"r1", "r2"} {
		ev, ok := log.Outcome(rid)
		if !ok || ev.Type != session.MessageRefused || ev.Reason != "test/no" || ev.Seq == 0 {
			t.Fatalf("the refusal of %s after the resume: %+v %v", rid, ev, ok)
		}
		decided := false
		for _, d := range log.Events(1)[:ev.Seq-1] {
			decided = decided || (d.Type == session.DecisionRecorded && d.Decision.RequestID == rid)
		}
		if !decided {
			t.Fatalf("the refusal of %s has no decision record before it", rid)
		}
	}
}
