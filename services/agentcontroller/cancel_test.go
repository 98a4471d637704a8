package agentcontroller_test

import (
	stdctx "context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/errs"

	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
)

// TestCancelledSenderLeavesWhileAStubbornListenerDecides is issue 11 item
// 12: a listener that ignores the signal must not keep a cancelled sender
// waiting. The sender gets its cause at once; the chain still waits for the
// listener before it decides the next message; the listener's late admit is
// discarded.
func TestCancelledSenderLeavesWhileAStubbornListenerDecides(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	entered := make(chan string, 4)
	releaseCh := make(chan struct{})
	release := sync.OnceFunc(func() { close(releaseCh) })
	// Registered after the env, so it runs before the controller's dispose,
	// which waits for this listener: a failing test fails instead of hanging.
	t.Cleanup(release)
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, ad agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		entered <- ad.Message.Content
		if ad.Message.Content == "stubborn" {
			<-releaseCh
			// Decide to admit as if the sender were still there.
			return next.Call(stdctx.WithoutCancel(ctx), ad)
		}
		return next.Call(ctx, ad)
	})
	cause := errors.New("the user pressed escape")
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	first := e.deliverAsync(ctx, a, send("stubborn"))
	if got := <-entered; got != "stubborn" {
		t.Fatalf("first decided %q", got)
	}
	second := e.deliverAsync(stdctx.Background(), a, send("next"))
	waitQueue(t, e, "a", 2)
	cancel(cause)
	if r := wait(t, first); r.err != cause {
		t.Fatalf("cancelled sender got %v, want its cause", r.err)
	}
	// The listener has not returned, so the next message still waits.
	if n := e.ctl.Waiting("a"); n != 1 {
		t.Fatalf("%d deliveries waiting behind the undecided one, want 1", n)
	}
	select {
	case got := <-entered:
		t.Fatalf("%q was decided before the stubborn listener settled", got)
	default:
	}
	release()
	if r := wait(t, second); r.err != nil {
		t.Fatal(r.err)
	}
	if got := <-entered; got != "next" {
		t.Fatalf("second decided %q", got)
	}
	if !slices.Equal(a.Messages(), []string{"next"}) {
		t.Fatalf("inbox %v: the late decision must be discarded", a.Messages())
	}
}

// TestCancelledWaitingSenderGetsItsCause: a sender behind a held message
// gets context.Cause, not context.Canceled.
func TestCancelledWaitingSenderGetsItsCause(t *testing.T) {
	e := newEnv(t)
	g := newHoldGate()
	g.install(t, e)
	a := e.agent("a")
	held := e.deliverAsync(stdctx.Background(), a, send("hold"))
	g.waitHolding(t)
	cause := errors.New("the webhook timed out")
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	waiting := e.deliverAsync(ctx, a, send("behind"))
	waitQueue(t, e, "a", 2)
	cancel(cause)
	if r := wait(t, waiting); r.err != cause {
		t.Fatalf("waiting sender got %v, want its cause", r.err)
	}
	if n := e.ctl.Waiting("a"); n != 0 {
		t.Fatalf("a sender that left still counts as waiting: %d", n)
	}
	// A sender already cancelled is refused with its cause before it queues.
	if _, err := e.ctl.Deliver(ctx, a, send("late")); err != cause {
		t.Fatalf("already cancelled sender got %v", err)
	}
	close(g.release)
	if r := wait(t, held); r.err != nil {
		t.Fatal(r.err)
	}
	if !slices.Equal(a.Messages(), []string{"hold"}) {
		t.Fatalf("inbox %v", a.Messages())
	}
}

// Withdraw takes back a message whose listener is still deciding. A
// sender that cannot cancel gives the listener no context to end, so the
// listener decides; its admit is discarded and the sender learns the
// message was dropped. A message sent after the withdrawal is admitted.
func TestWithdrawDiscardsTheDecisionOfAnUncancellableSender(t *testing.T) {
	e := newEnv(t)
	g := newHoldGate()
	g.install(t, e)
	a := e.agent("a")
	held := e.deliverAsync(stdctx.Background(), a, send("hold"))
	g.waitHolding(t)
	behind := e.deliverAsync(stdctx.Background(), a, send("behind"))
	waitQueue(t, e, "a", 2)
	cause := errs.New("TEST_CANCELLED", "cancelled")
	cause.Details = map[string]any{"by": "the operator"}
	if n := e.ctl.Withdraw(a, cause); n != 2 {
		t.Fatalf("withdrew %d deliveries, want 2", n)
	}
	close(g.release)
	for _, ch := range []chan result{held, behind} {
		r := wait(t, ch)
		e, ok := errors.AsType[*errs.Error](r.err)
		if !ok || e.Code != agentcontroller.MessageDropped || e.Details["by"] != "the operator" {
			t.Fatalf("sender got %v, want %s by the operator", r.err, agentcontroller.MessageDropped)
		}
	}
	if got := a.Messages(); len(got) != 0 {
		t.Fatalf("withdrawn messages reached the inbox: %v", got)
	}
	if r := wait(t, e.deliverAsync(stdctx.Background(), a, send("later"))); r.err != nil {
		t.Fatal(r.err)
	}
	if got := a.Messages(); !slices.Equal(got, []string{"later"}) {
		t.Fatalf("inbox %v, want the message sent after the withdrawal", got)
	}
	if n := e.ctl.Withdraw(a, cause); n != 0 {
		t.Fatalf("an idle chain withdrew %d", n)
	}
}

// eventLog is an agent that keeps the events the controller records for it.
type eventLog struct {
	*recorder
	mu     sync.Mutex
	events []session.Event
}

func (l *eventLog) RecordEvent(ev session.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
	return nil
}

func (l *eventLog) recorded() []session.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// TestWithdrawReachesADeliveryWaitingOnAHeldStage: a message waiting for a
// config reload to release the admission stage is the cancel's like any
// other: its sender learns it was dropped, the log records message/dropped
// (not a failure of the stage), and a retry of its request id learns the
// same once the reload is over.
func TestWithdrawReachesADeliveryWaitingOnAHeldStage(t *testing.T) {
	e := newEnv(t)
	a := &eventLog{recorder: e.agent("a")}
	e.reg.Publish(a) // the controller delivers to the agent the registry holds
	release, err := e.ctl.Hold(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	req := send("during the reload")
	req.RequestID = "r1"
	ch := e.deliverAsync(ctx, a, req)
	waitFor(t, "a delivery waiting for the hold", holdWaiting(e, 1))
	cause := errs.New("TEST_CANCELLED", "cancelled")
	cause.Details = map[string]any{"by": "the operator"}
	if n := e.ctl.Withdraw(a, cause); n != 1 {
		t.Fatalf("withdrew %d deliveries, want 1", n)
	}
	dropped := func(err error) bool {
		e, ok := errors.AsType[*errs.Error](err)
		return ok && e.Code == agentcontroller.MessageDropped && e.Details["by"] == "the operator"
	}
	if r := wait(t, ch); !dropped(r.err) {
		t.Fatalf("sender got %v, want %s by the operator", r.err, agentcontroller.MessageDropped)
	}
	release()
	if r := wait(t, e.deliverAsync(stdctx.Background(), a, req)); !dropped(r.err) {
		t.Fatalf("retry got %v, want %s by the operator", r.err, agentcontroller.MessageDropped)
	}
	evs := a.recorded()
	if len(evs) != 1 || evs[0].Type != session.MessageDropped || evs[0].Reason != session.DroppedCancelled || evs[0].RequestID != "r1" {
		t.Fatalf("recorded %+v, want one message/dropped (cancelled) for r1", evs)
	}
	if got := a.Messages(); len(got) != 0 {
		t.Fatalf("a withdrawn message reached the inbox: %v", got)
	}
}
