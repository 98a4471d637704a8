package tools_test

import (
	stdctx "context"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
)

// A call that reaches a held approval stage waits for the release and is
// decided by the policy put in place meanwhile (a reload's new deny rule).
func TestAHeldCallIsDecidedByThePolicyInPlaceAtRelease(t *testing.T) {
	st := newStage(t)
	release, err := st.tools.Hold(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan tools.Result, 1)
	go func() {
		r, _ := st.exec(t, stdctx.Background(), "read", "x")
		done <- r
	}()
	select {
	case r := <-done:
		t.Fatalf("the call was decided while the stage was held: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	off, err := tools.EventApprove.On(st.root, func(stdctx.Context, tools.Approval, tools.ApproveNext) (tools.Verdict, error) {
		return tools.Verdict{Decision: tools.Deny, Reason: "reads are off", Source: "new-policy"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer off()
	release()
	mustContain(t, <-done, "denied", "reads are off")
	if st.ran.Load() != 0 {
		t.Fatal("a denied call ran")
	}
}

// A hold whose limit passes before the swap ends refuses the calls that
// waited and those that come, until release: they never run unchecked.
func TestAHoldPastItsLimitRefusesCalls(t *testing.T) {
	st := newStage(t)
	limit, cancel := stdctx.WithCancel(stdctx.Background())
	release, err := st.tools.Hold(limit)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan tools.Result, 1)
	go func() {
		r, _ := st.exec(t, stdctx.Background(), "read", "x")
		done <- r
	}()
	cancel()
	mustContain(t, <-done, "config reload", "did not run", "retry")
	r, err := st.exec(t, stdctx.Background(), "read", "x")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, r, "config reload")
	if st.ran.Load() != 0 {
		t.Fatal("a call ran while the approval stage was held past its limit")
	}
	release()
	if r, err := st.exec(t, stdctx.Background(), "read", "x"); err != nil || r.IsError || st.ran.Load() != 1 {
		t.Fatalf("after release: %+v %v", r, err)
	}
}

// Hold waits for the decisions already running; past its ctx it says how
// many still were, and the calls held meanwhile are refused.
func TestHoldWaitsForDecisionsInFlight(t *testing.T) {
	st := newStage(t)
	entered, finish := make(chan struct{}), make(chan struct{})
	off, err := tools.EventApprove.On(st.root, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		close(entered)
		<-finish
		return next.Call(ctx, a)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer off()
	done := make(chan error, 1)
	go func() {
		_, err := st.exec(t, stdctx.Background(), "read", "x")
		done <- err
	}()
	<-entered
	short, cancel := stdctx.WithTimeout(stdctx.Background(), 20*time.Millisecond)
	defer cancel()
	release, err := st.tools.Hold(short)
	if !errs.HasCode(err, tools.HoldDrainTimeout) || release == nil {
		t.Fatalf("Hold with a decision in flight past its ctx: %v", err)
	}
	close(finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	release()

	// A hold with time enough returns once the decision in flight ended.
	entered2, finish2 := make(chan struct{}), make(chan struct{})
	off()
	off2, _ := tools.EventApprove.On(st.root, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		close(entered2)
		<-finish2
		return next.Call(ctx, a)
	})
	defer off2()
	go func() {
		_, err := st.exec(t, stdctx.Background(), "read", "x")
		done <- err
	}()
	<-entered2
	held := make(chan func(), 1)
	go func() {
		r, _ := st.tools.Hold(stdctx.Background())
		held <- r
	}()
	select {
	case <-held:
		t.Fatal("Hold returned while a decision begun before it still ran")
	case <-time.After(20 * time.Millisecond):
	}
	close(finish2)
	(<-held)()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
