package holdgate_test

import (
	stdctx "context"
	"errors"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/holdgate"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var stage = holdgate.Stage{Name: "test", Deciders: "deciders", DrainTimeout: "TEST_DRAIN_TIMEOUT"}

// A hold waits for the decision in flight, makes a later one wait for its
// release, and the later one is then let in.
func TestAHoldDrainsThenHoldsUntilReleased(t *testing.T) {
	var g holdgate.Gate
	if err := g.Enter(t.Context()); err != nil {
		t.Fatal(err)
	}
	held := make(chan func())
	go func() {
		release, err := g.Hold(t.Context(), stage)
		if err != nil {
			t.Error(err)
		}
		held <- release
	}()
	select {
	case <-held:
		t.Fatal("the hold returned while a decision was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	g.Leave()
	release := <-held
	entered := make(chan error)
	go func() { entered <- g.Enter(t.Context()) }()
	for g.Waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	release()
	if err := <-entered; err != nil {
		t.Fatalf("a decision released from the hold: %v", err)
	}
	g.Leave()
	if g.Held() || g.Waiting() != 0 {
		t.Fatal("the gate is not open after the release")
	}
}

// A hold whose limit ends refuses the waiting and later decisions with
// the limit's cause; a decision whose own ctx ends first gets its cause.
func TestAHoldPastItsLimitRefusesWithItsCause(t *testing.T) {
	var g holdgate.Gate
	limit, cancel := stdctx.WithCancelCause(t.Context())
	release, err := g.Hold(limit, stage)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	mine, stop := stdctx.WithCancelCause(t.Context())
	gone := errors.New("the sender left")
	stop(gone)
	if err := g.Enter(mine); err != gone {
		t.Fatalf("a decision whose ctx ended: %v; want its cause", err)
	}
	lost := errors.New("a policy could not be restored")
	cancel(lost)
	var overran *holdgate.Overran
	if err := g.Enter(t.Context()); !errors.As(err, &overran) || overran.Cause != lost {
		t.Fatalf("a decision after the limit: %v; want Overran with the limit's cause", err)
	}
}

// A second hold waits for the first; when its ctx ends first it fails
// with the stage's code, and so does a hold that cannot drain in time.
func TestHoldsDoNotNestAndDrainInTime(t *testing.T) {
	var g holdgate.Gate
	release, err := g.Hold(t.Context(), stage)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := g.Hold(ctx, stage); !errs.HasCode(err, stage.DrainTimeout) {
		t.Fatalf("a second hold: %v; want %s", err, stage.DrainTimeout)
	}
	release()
	if err := g.Enter(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := stdctx.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	release2, err := g.Hold(ctx2, stage)
	if !errs.HasCode(err, stage.DrainTimeout) || release2 == nil {
		t.Fatalf("a hold over a decision that never ends: %v; want %s and a release", err, stage.DrainTimeout)
	}
	release2()
	g.Leave()
}
