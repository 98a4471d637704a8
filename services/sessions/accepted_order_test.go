package sessions_test

import (
	stdctx "context"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestAQueuedMessageCancelledWhileTheDriverHoldsThePen: a message queued
// while the driver holds the pen (here in an agent/stop listener) has its
// message/queued still in memory when a cancel drops it. The driver then
// writes both; the drop must come after the queued record, or the log's
// last word on the request is "queued" and a resume runs a message whose
// sender was told it was dropped.
func TestAQueuedMessageCancelledWhileTheDriverHoldsThePen(t *testing.T) {
	e := newEnv(t, setup{dir: t.TempDir()})
	entered, release := make(chan struct{}, 1), make(chan struct{})
	held := false
	if _, err := agentloop.EventStop.On(e.root, func(ctx stdctx.Context, c agentloop.StopCheck, next agentloop.StopNext) (agentloop.Stop, error) {
		if !held {
			held = true
			entered <- struct{}{}
			<-release
		}
		return next.Call(ctx, c)
	}); err != nil {
		t.Fatal(err)
	}
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, e, "w")
	if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r1", Content: "go"}); err != nil {
		t.Fatal(err)
	}
	wait(t, entered)
	sent := make(chan error, 1)
	go func() {
		_, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r2", Content: "later"})
		sent <- err
	}()
	pending := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			in, err := e.ctl.Info(ctx, "w")
			if err != nil {
				t.Fatal(err)
			}
			if in.Pending == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("pending %d; want %d", in.Pending, n)
			}
		}
	}
	pending(1)
	cancelled := make(chan error, 1)
	go func() { cancelled <- e.ctl.Cancel(ctx, "w") }()
	pending(0)
	close(release)
	if err := wait(t, cancelled); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, sent); err != nil {
		t.Fatalf("r2 was accepted before the cancel: %v", err)
	}
	var types []session.Type
	for _, ev := range s.Log().Events(1) {
		if ev.RequestID == "r2" && ev.Type != session.DecisionRecorded {
			types = append(types, ev.Type)
		}
	}
	if len(types) != 2 || types[0] != session.MessageQueued || types[1] != session.MessageDropped {
		t.Fatalf("r2's events: %v; want message/queued then message/dropped", types)
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	s = mustSession(t, e, "w")
	if err := e.ctl.Idle(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	for _, ev := range s.Log().Events(1) {
		if ev.RequestID == "r2" && (ev.Type == session.UserMessage || ev.Type == session.SteeringMessage) {
			t.Fatalf("the resume ran r2, which its cancel dropped: %+v", ev)
		}
	}
	if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r2", Content: "later"}); !errs.HasCode(err, sessions.MessageDropped) {
		t.Fatalf("r2's retry after the resume: %v; want %s", err, sessions.MessageDropped)
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
}
