package agentloop_test

import (
	stdctx "context"
	"testing"

	"runtime"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// TestAStuckAgentDoesNotHangTheLoopsDisposal: after a dispose timed out,
// disposing the loop does not wait for the stuck turn again; the agent's
// session and id are let go when that turn stops, with disposed emitted
// once.
func TestAStuckAgentDoesNotHangTheLoopsDisposal(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "stuck"}}}, {Text: "done"}}, agentloop.Config{})
	entered, release := make(chan struct{}), make(chan struct{})
	e.tool("stuck", func(stdctx.Context, tools.Call) (tools.Result, error) {
		close(entered)
		<-release
		return tools.Result{Content: "late"}, nil
	})
	disposed := 0
	agents.EventDisposed.On(e.root, func(stdctx.Context, agents.Agent) error { disposed++; return nil })
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", SessionID: "s1", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	h.Agent.Followup(user("go"))
	<-entered
	gone, cancel := stdctx.WithCancel(stdctx.Background())
	cancel()
	if err := h.Dispose(gone); !errs.HasCode(err, agents.DisposeTimeout) {
		t.Fatalf("dispose past its deadline: %v", err)
	}
	store, _ := session.Key.Get(e.root)
	if _, err := store.Create(e.root, "b", "s1"); !errs.Has(err, session.SessionLocked, session.ReasonClosing) {
		t.Fatalf("the session of a stopping agent: %v", err)
	}
	e.loop.Dispose(stdctx.Background()) // returns although the tool is still stuck
	if disposed != 0 {
		t.Fatal("agent/disposed before the agent's turn stopped")
	}
	close(release)
	if err := h.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if _, held := store.Get("s1"); held {
		t.Fatal("the session is still held after the turn stopped")
	}
}

// TestAnOutcomeHandedOverAsTheAgentClosesIsWritten: a refusal the agent
// controller hands to a driver that is just going idle, while a close
// begins, lands in the log before the session is let go. (A webhook's
// fresh session is closed right after its delivery is refused; the
// redelivery must find the refusal there.)
func TestAnOutcomeHandedOverAsTheAgentClosesIsWritten(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{Text: "done"}}, agentloop.Config{})
	h := e.create("a")
	recorder, ok := h.Agent.(interface{ RecordEvent(session.Event) error })
	if !ok {
		t.Fatal("the loop's agent records no events")
	}
	disposed := make(chan error, 1)
	once := false
	agents.EventStatus.On(e.root, func(_ stdctx.Context, c agents.StatusChange) error {
		if c.To != agents.StatusIdle || once {
			return nil
		}
		once = true
		// The driver is between going idle and deciding to exit.
		ev := session.Event{Type: session.MessageRefused, RequestID: "r2", Reason: "test/late",
			Message: &llm.Message{ID: "m2", Role: llm.RoleUser, Content: "late"}}
		if err := recorder.RecordEvent(ev); err != nil {
			t.Error(err)
		}
		go func() { disposed <- h.Dispose(stdctx.Background()) }()
		for h.Agent.Status() != agents.StatusDisposed {
			runtime.Gosched()
		}
		return nil
	})
	h.Agent.Followup(user("go"))
	if err := <-disposed; err != nil {
		t.Fatal(err)
	}
	if ev, ok := h.Agent.Session().Outcome("r2"); !ok || ev.Type != session.MessageRefused || ev.Reason != "test/late" {
		t.Fatalf("the refusal handed over during the close: %+v %v; log %v", ev, ok, trace(h.Agent.Session()))
	}
}

// TestWhatIsHandedOverOnceTheCloseBeganIsWrittenOrRefused: an idle agent
// whose close has begun has no driver left to append; a refusal and its
// decision record handed over then are written by the close itself, and
// once the close wrote its last events the agent refuses more, so that
// the controller never reports an outcome that no log holds.
func TestWhatIsHandedOverOnceTheCloseBeganIsWrittenOrRefused(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	h := e.create("a")
	a := h.Agent.(*agentloop.ReactLoopAgent)
	refusal := func(rid string) session.Event {
		return session.Event{Type: session.MessageRefused, RequestID: rid, Reason: "test/late",
			Message: &llm.Message{ID: "m-" + rid, Role: llm.RoleUser, Content: "late"}}
	}
	agents.EventStatus.On(e.root, func(_ stdctx.Context, c agents.StatusChange) error {
		if c.To != agents.StatusDisposed {
			return nil
		}
		if err := a.RecordDecision(session.Decision{Stage: session.StageAdmission, Verdict: "refuse", RequestID: "r1", MessageID: "m-r1"}); err != nil {
			t.Errorf("a decision handed over as the close began: %v", err)
		}
		if err := a.RecordEvent(refusal("r1")); err != nil {
			t.Errorf("a refusal handed over as the close began: %v", err)
		}
		return nil
	})
	if err := h.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if ev, ok := a.Session().Outcome("r1"); !ok || ev.Reason != "test/late" {
		t.Fatalf("the refusal handed over during the close: %+v %v; log %v", ev, ok, trace(a.Session()))
	}
	decided := false
	for _, ev := range a.Session().Events(1) {
		decided = decided || (ev.Type == session.DecisionRecorded && ev.Decision.RequestID == "r1")
	}
	if !decided {
		t.Fatal("the decision record handed over during the close is not in the log")
	}
	if err := a.RecordEvent(refusal("r2")); !errs.HasCode(err, agents.AgentDisposed) {
		t.Fatalf("a refusal handed over after the close: %v", err)
	}
	if err := a.RecordDecision(session.Decision{Stage: session.StageAdmission, Verdict: "refuse", RequestID: "r2"}); !errs.HasCode(err, agents.AgentDisposed) {
		t.Fatalf("a decision handed over after the close: %v", err)
	}
}

// TestAnOutcomeHandedOverBeforeATurnStartsIsWrittenWithItsPrompt: a
// refusal handed over after the driver took the next turn's messages,
// before the turn started, goes into the log ahead of the turn and is
// made durable by its prompt's checkpoint — not at the turn's end, which
// a crash during the turn would never reach, although the refused sender
// was answered long before.
func TestAnOutcomeHandedOverBeforeATurnStartsIsWrittenWithItsPrompt(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "hold"}}}, {Text: "done"}}, agentloop.Config{})
	running, release := make(chan struct{}), make(chan struct{})
	e.tool("hold", func(stdctx.Context, tools.Call) (tools.Result, error) {
		close(running)
		<-release
		return tools.Result{Content: "held"}, nil
	})
	h := e.create("a")
	a := h.Agent.(*agentloop.ReactLoopAgent)
	agents.EventStatus.On(e.root, func(_ stdctx.Context, c agents.StatusChange) error {
		if c.To == agents.StatusRunning {
			// The driver took the turn's messages and has not started it.
			if err := a.RecordEvent(session.Event{Type: session.MessageRefused, RequestID: "r0", Reason: "test/no",
				Message: &llm.Message{ID: "m0", Role: llm.RoleUser, Content: "no"}}); err != nil {
				t.Error(err)
			}
		}
		return nil
	})
	h.Agent.Followup(user("go"))
	<-running
	ev, ok := a.Session().Outcome("r0")
	if durable := a.Session().Durable(); !ok || durable < ev.Seq {
		close(release)
		t.Fatalf("while the turn runs, the refusal handed over before it started is %+v (%v), durable up to %d; log %v", ev, ok, durable, trace(a.Session()))
	}
	close(release)
	idle(t, h.Agent)
}
