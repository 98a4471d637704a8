package agentloop_test

import (
	stdctx "context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
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

// TestADisposeWaitsForTheOutcomeWriter: a dispose that comes while the
// outcome writer checkpoints a refusal (a slow store) waits for it — the
// driver's step aborts, its last appends wait for the pen — and then
// writes and lets go: the refusal is in the log once, after its decision,
// the turn ends disposed, and no writer is left behind (goleak).
func TestADisposeWaitsForTheOutcomeWriter(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "hold"}}}, {Text: "done"}}, agentloop.Config{})
	e.tool("hold", func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	})
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	a := h.Agent.(*agentloop.ReactLoopAgent)
	calling := make(chan struct{})
	flushing, release := make(chan struct{}), make(chan struct{})
	held := false
	session.EventFlush.On(e.root, func(ctx stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		if ev, ok := f.Session.Outcome("r1"); ok && ev.Seq <= f.Seq && !held {
			held = true
			close(flushing)
			<-release // the store is slow to write the refusal
		}
		if !held {
			for _, ev := range f.Session.Events(1) {
				if ev.Type == session.ToolCall {
					select {
					case <-calling:
					default:
						close(calling)
					}
				}
			}
		}
		return next.Call(ctx, f)
	})
	h.Agent.Followup(user("go"))
	<-calling
	session.EventDecision.Emit(stdctx.Background(), a.Context(), session.Decided{AgentID: "a", WithOutcome: true, Decision: session.Decision{
		Stage: session.StageAdmission, Verdict: "refuse", Reason: "test/no", RequestID: "r1", MessageID: "m1"}})
	if err := a.RecordEvent(session.Event{Type: session.MessageRefused, RequestID: "r1", Reason: "test/no",
		Message: &llm.Message{ID: "m1", Role: llm.RoleUser, Content: "no"}}); err != nil {
		t.Fatal(err)
	}
	<-flushing
	disposed := make(chan error, 1)
	go func() { disposed <- h.Dispose(stdctx.Background()) }()
	select {
	case err := <-disposed:
		close(release)
		t.Fatalf("the dispose returned %v while the writer still checkpointed", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-disposed; err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range a.Session().Events(1) {
		switch {
		case ev.Type == session.DecisionRecorded && ev.Decision.RequestID == "r1":
			got = append(got, "decision r1")
		case ev.RequestID == "r1":
			got = append(got, string(ev.Type))
		case ev.Type == session.TurnEnd:
			got = append(got, "turn/end "+ev.Reason)
		}
	}
	if want := "decision r1 | message/refused | turn/end disposed"; strings.Join(got, " | ") != want {
		t.Fatalf("the log: %s; want %s", strings.Join(got, " | "), want)
	}
}
