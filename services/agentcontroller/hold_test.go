package agentcontroller_test

import (
	stdctx "context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

// waitFor polls cond, a state the test cannot be signalled about (a
// goroutine parked in the controller), failing after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func holdWaiting(e *env, n int) func() bool {
	return func() bool { return agentcontroller.HoldWaiting(e.ctl) == n }
}

// TestHoldKeepsDeliveriesUntilTheNewListenersAreIn: a delivery made while
// the stage is held is decided by the listener registered during the hold.
func TestHoldKeepsDeliveriesUntilTheNewListenersAreIn(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	release, err := e.ctl.Hold(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	ch := e.deliverAsync(stdctx.Background(), a, send("during the swap"))
	waitFor(t, "a delivery waiting for the hold", holdWaiting(e, 1))
	if len(a.Messages()) != 0 {
		t.Fatal("a delivery passed a held stage")
	}
	var seen []string
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, ad agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		seen = append(seen, ad.Message.Content)
		return next.Call(ctx, ad)
	})
	release()
	release() // idempotent
	if r := wait(t, ch); r.err != nil {
		t.Fatal(r.err)
	}
	if !slices.Equal(seen, []string{"during the swap"}) || !slices.Equal(a.Messages(), []string{"during the swap"}) {
		t.Fatalf("seen %v inbox %v", seen, a.Messages())
	}
}

// TestHoldWaitsForDecisionsInFlight: Hold returns once the decision that
// began before it finished.
func TestHoldWaitsForDecisionsInFlight(t *testing.T) {
	e := newEnv(t)
	g := newHoldGate()
	g.install(t, e)
	a := e.agent("a")
	first := e.deliverAsync(stdctx.Background(), a, send("hold"))
	g.waitHolding(t)
	held := make(chan error, 1)
	var release func()
	go func() {
		var err error
		release, err = e.ctl.Hold(stdctx.Background())
		held <- err
	}()
	waitFor(t, "a hold in place", func() bool { return agentcontroller.Holding(e.ctl) })
	select {
	case err := <-held:
		t.Fatalf("Hold returned while a decision was in flight: %v", err)
	default:
	}
	close(g.release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if r := wait(t, first); r.err != nil {
		t.Fatal(r.err)
	}
	release()
}

func TestHoldDrainBoundedByItsContext(t *testing.T) {
	e := newEnv(t)
	g := newHoldGate()
	g.install(t, e)
	a := e.agent("a")
	first := e.deliverAsync(stdctx.Background(), a, send("hold"))
	g.waitHolding(t)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	cancel()
	release, err := e.ctl.Hold(ctx)
	if !errs.HasCode(err, agentcontroller.HoldDrainTimeout) || release == nil {
		t.Fatalf("got %v", err)
	}
	release()
	close(g.release)
	if r := wait(t, first); r.err != nil {
		t.Fatal(r.err)
	}
}

// TestHoldPastItsLimitRefusesNeverAdmits: a hold whose ctx ended refuses
// waiting and new deliveries with ReasonHeld until it is released.
func TestHoldPastItsLimitRefusesNeverAdmits(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	limit, expire := stdctx.WithCancel(stdctx.Background())
	release, err := e.ctl.Hold(limit)
	if err != nil {
		t.Fatal(err)
	}
	waiting := e.deliverAsync(stdctx.Background(), a, send("waits"))
	waitFor(t, "a delivery waiting for the hold", holdWaiting(e, 1))
	expire()
	for _, r := range []result{wait(t, waiting), wait(t, e.deliverAsync(stdctx.Background(), a, send("late")))} {
		ref, ok := agentcontroller.RefusalOf(r.err)
		if !ok || ref.Reason != agentcontroller.ReasonHeld || ref.Presented {
			t.Fatalf("got %v", r.err)
		}
	}
	release()
	if _, err := e.ctl.Deliver(stdctx.Background(), a, send("after")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Messages(), []string{"after"}) {
		t.Fatalf("inbox %v", a.Messages())
	}
}

func TestSenderLeavesAHeldStage(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	release, _ := e.ctl.Hold(stdctx.Background())
	defer release()
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	ch := e.deliverAsync(ctx, a, send("gives up"))
	waitFor(t, "a delivery waiting for the hold", holdWaiting(e, 1))
	cancel()
	if r := wait(t, ch); !errors.Is(r.err, stdctx.Canceled) {
		t.Fatalf("got %v", r.err)
	}
	waitFor(t, "the waiter gone", holdWaiting(e, 0))
}

func TestControllerStopReleasesAHeldDelivery(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	release, _ := e.ctl.Hold(stdctx.Background())
	defer release()
	ch := e.deliverAsync(stdctx.Background(), a, send("stopped"))
	waitFor(t, "a delivery waiting for the hold", holdWaiting(e, 1))
	if err := e.fiber.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if ref, ok := agentcontroller.RefusalOf(wait(t, ch).err); !ok || ref.Reason != agentcontroller.ReasonStopped {
		t.Fatalf("got %+v", ref)
	}
}

// TestSecondHoldWaitsForTheFirst: holds do not nest.
func TestSecondHoldWaitsForTheFirst(t *testing.T) {
	e := newEnv(t)
	release, _ := e.ctl.Hold(stdctx.Background())
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	cancel()
	if _, err := e.ctl.Hold(ctx); !errs.HasCode(err, agentcontroller.HoldDrainTimeout) {
		t.Fatalf("got %v", err)
	}
	release()
	again, err := e.ctl.Hold(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	again()
}
