package sessions_test

import (
	stdctx "context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// A cancel takes every message the session accepted, wherever it is: in
// the inbox, held by an admission listener, or waiting behind the held
// one (a prompt and a steering message). Each ends in one recorded
// message/dropped naming who cancelled, its sender is told so, a retry
// of its request id learns the same, and none of them runs a turn. A
// prompt sent after the cancel is delivered as usual.
func TestCancelWithdrawsWhatIsStillInAdmission(t *testing.T) {
	e := newEnv(t, setup{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "after"}}})
	g := e.gateTool("block")
	holding := make(chan struct{}, 4)
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if strings.HasPrefix(a.Message.Content, "hold") {
			holding <- struct{}{}
			<-ctx.Done() // held until the sender or a cancel lets go
			return agentcontroller.Decision{}, ctx.Err()
		}
		return next.Call(ctx, a)
	})
	// Entry points deliver with a context they can cancel (a request's,
	// a connection's); so does this test.
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	running, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r1", Content: "block"})
	if err != nil {
		t.Fatal(err)
	}
	g.wait(t)

	type sent struct {
		rid string
		err error
	}
	results := make(chan sent, 3)
	send := func(rid, content string, steer bool) {
		go func() {
			var err error
			if steer {
				_, err = e.ctl.Steer(ctx, "w", sessions.PromptRequest{RequestID: rid, Content: content})
			} else {
				_, err = e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: rid, Content: content})
			}
			results <- sent{rid, err}
		}()
	}
	send("r2", "hold me", false)
	wait(t, holding)
	send("r3", "behind the held one", false)
	waitInAdmission(t, e, 2)
	send("r4", "steer behind it", true)
	waitInAdmission(t, e, 3)

	if err := e.ctl.Cancel(sessions.WithActor(ctx, "the test"), "w"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		r := wait(t, results)
		if !errs.HasCode(r.err, sessions.MessageDropped) {
			t.Fatalf("%s: the sender got %v, want %s", r.rid, r.err, sessions.MessageDropped)
		}
	}
	if end, err := running.Wait(ctx); err != nil || end.End.Reason != "aborted" {
		t.Fatalf("the running turn: %+v %v", end, err)
	}
	for rid, content := range map[string]string{"r2": "hold me", "r3": "behind the held one", "r4": "steer behind it"} {
		o, ok, err := e.ctl.Outcome(ctx, "w", rid)
		if err != nil || !ok || o.Outcome != sessions.FateDropped || o.By != "the test" || o.Reason != session.DroppedCancelled {
			t.Fatalf("outcome of %s: %+v %v %v", rid, o, ok, err)
		}
		// A retry (the same text) is answered from the record, not
		// decided again.
		if _, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: rid, Content: content}); !errs.HasCode(err, sessions.MessageDropped) {
			t.Fatalf("retry of %s: %v, want %s", rid, err, sessions.MessageDropped)
		}
	}

	after, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r5", Content: "after the cancel"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := after.Wait(ctx); err != nil || r.Outcome != sessions.FateDelivered || r.End.Reason != "completed" {
		t.Fatalf("the prompt after the cancel: %+v %v", r, err)
	}
	// Exactly one outcome event per request id, and no withdrawn text in
	// the conversation.
	count := map[string]int{}
	for _, ev := range e.events(mustSession(t, e, "w")) {
		switch ev.Type {
		case session.UserMessage, session.SteeringMessage, session.MessageDropped, session.MessageRefused, session.MessageExpired:
			count[ev.RequestID]++
			if ev.Type != session.MessageDropped && ev.RequestID != "r1" && ev.RequestID != "r5" {
				t.Fatalf("a withdrawn message reached the conversation: %+v", ev)
			}
		}
	}
	for _, rid := range []string{"r1", "r2", "r3", "r4", "r5"} {
		if count[rid] != 1 {
			t.Fatalf("request %s has %d outcome events, want 1: %v", rid, count[rid], count)
		}
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
}

// waitInAdmission waits until n deliveries to session w's agent are in
// the admission stage: the held one and n-1 behind it.
func waitInAdmission(t *testing.T, e *env, n int) {
	t.Helper()
	ctl, _ := agentcontroller.Key.Get(e.root)
	id := mustSession(t, e, "w").AgentID()
	deadline := time.Now().Add(10 * time.Second)
	for ctl.Waiting(id) < n-1 {
		if time.Now().After(deadline) {
			t.Fatalf("never %d deliveries in admission", n)
		}
		time.Sleep(time.Millisecond)
	}
}

func mustSession(t testing.TB, e *env, id string) *sessions.Session {
	t.Helper()
	s, ok := e.ctl.Get(id)
	if !ok {
		t.Fatalf("no session %s", id)
	}
	return s
}
