package agentcontroller_test

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hold installs a listener that holds messages whose content starts with
// "hold" until g.release closes or the signal ends.
func (g *holdGate) install(t testing.TB, e *env) {
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if strings.HasPrefix(a.Message.Content, "hold") {
			g.holding <- a.Message.Content
			select {
			case <-g.release:
			case <-ctx.Done():
				return agentcontroller.Decision{}, ctx.Err()
			}
		}
		return next.Call(ctx, a)
	})
}

// waitQueue waits until n deliveries to agentID are in flight: the one
// being decided and n-1 waiting behind it.
func waitQueue(t *testing.T, e *env, agentID string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.ctl.Waiting(agentID) < n-1 {
		if time.Now().After(deadline) {
			t.Fatalf("never %d deliveries in flight to %s", n, agentID)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDeliverAdmitsAndReturnsTheMessageID(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	var inserted []string
	agentcontroller.EventInserted.On(e.root, func(_ stdctx.Context, in agentcontroller.Inserted) error {
		inserted = append(inserted, in.Message.ID)
		if a.Pending() == 0 {
			t.Error("agent/inbox/inserted ran before the insertion")
		}
		return nil
	})
	id, err := e.ctl.Deliver(stdctx.Background(), a, send("hello"))
	if err != nil || id == "" {
		t.Fatalf("deliver: %q %v", id, err)
	}
	steerReq := send("turn left")
	steerReq.Mode = agentcontroller.Steer
	if _, err := e.ctl.Deliver(stdctx.Background(), a, steerReq); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Messages(), []string{"hello", "turn left"}) || !slices.Equal(a.Modes(), []string{"followup", "steer"}) {
		t.Fatalf("inbox %v modes %v", a.Messages(), a.Modes())
	}
	if len(inserted) != 2 || inserted[0] != id {
		t.Fatalf("inserted events %v", inserted)
	}
}

func TestPrepareRunsInArrivalOrderAfterEarlierSettled(t *testing.T) {
	e := newEnv(t)
	g := newHoldGate()
	g.install(t, e)
	a := e.agent("a")
	var mu sync.Mutex
	var prepared []string
	prep := func(text string) agentcontroller.Request {
		r := send("")
		r.Prepare = func(stdctx.Context) (agentcontroller.Prepared, error) {
			mu.Lock()
			prepared = append(prepared, text)
			mu.Unlock()
			return agentcontroller.Prepared{Content: text}, nil
		}
		return r
	}
	first := e.deliverAsync(stdctx.Background(), a, prep("hold-1"))
	g.waitHolding(t)
	second := e.deliverAsync(stdctx.Background(), a, prep("2"))
	waitQueue(t, e, "a", 2) // arrival order is the order of enqueueing
	third := e.deliverAsync(stdctx.Background(), a, prep("3"))
	waitQueue(t, e, "a", 3)
	mu.Lock()
	if !slices.Equal(prepared, []string{"hold-1"}) {
		t.Fatalf("later deliveries prepared while an earlier one was held: %v", prepared)
	}
	mu.Unlock()
	close(g.release)
	for _, ch := range []chan result{first, second, third} {
		if r := wait(t, ch); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if !slices.Equal(a.Messages(), []string{"hold-1", "2", "3"}) {
		t.Fatalf("inbox order %v", a.Messages())
	}
}

func TestHeldMessageBlocksOnlyItsAgent(t *testing.T) {
	e := newEnv(t)
	g := newHoldGate()
	g.install(t, e)
	a, b := e.agent("a"), e.agent("b")
	held := e.deliverAsync(stdctx.Background(), a, send("hold"))
	g.waitHolding(t)
	if _, err := e.ctl.Deliver(stdctx.Background(), b, send("b goes through")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Messages(), []string{"b goes through"}) || len(a.Messages()) != 0 {
		t.Fatalf("a %v b %v", a.Messages(), b.Messages())
	}
	close(g.release)
	if r := wait(t, held); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestCancelWhileWaitingReturnsAtOnceAndKeepsOrder(t *testing.T) {
	e := newEnv(t)
	g := newHoldGate()
	g.install(t, e)
	a := e.agent("a")
	var preparedCancelled atomic.Bool
	first := e.deliverAsync(stdctx.Background(), a, send("hold-1"))
	g.waitHolding(t)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	cancelled := send("")
	cancelled.Prepare = func(stdctx.Context) (agentcontroller.Prepared, error) {
		preparedCancelled.Store(true)
		return agentcontroller.Prepared{Content: "never"}, nil
	}
	second := e.deliverAsync(ctx, a, cancelled)
	waitQueue(t, e, "a", 2)
	third := e.deliverAsync(stdctx.Background(), a, send("3"))
	waitQueue(t, e, "a", 3)
	cancel()
	if r := wait(t, second); !errors.Is(r.err, stdctx.Canceled) {
		t.Fatalf("cancelled sender got %v", r.err)
	}
	close(g.release)
	wait(t, first)
	wait(t, third)
	if !slices.Equal(a.Messages(), []string{"hold-1", "3"}) || preparedCancelled.Load() {
		t.Fatalf("inbox %v, cancelled one prepared: %v", a.Messages(), preparedCancelled.Load())
	}
}

func TestCancelWhileHeldReachesTheListener(t *testing.T) {
	e := newEnv(t)
	g := newHoldGate()
	g.install(t, e)
	a := e.agent("a")
	released := make(chan struct{})
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	req := send("")
	req.Prepare = func(stdctx.Context) (agentcontroller.Prepared, error) {
		return agentcontroller.Prepared{Content: "hold", Release: func() { close(released) }}, nil
	}
	ch := e.deliverAsync(ctx, a, req)
	g.waitHolding(t)
	cancel()
	if r := wait(t, ch); !errors.Is(r.err, stdctx.Canceled) {
		t.Fatalf("got %v", r.err)
	}
	// The sender is answered before the listener settles; the prepared
	// content is released once it has.
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the prepared content was never released")
	}
	if len(a.Messages()) != 0 {
		t.Fatalf("inbox %v", a.Messages())
	}
}

func TestAgentGoneWhileHeld(t *testing.T) {
	e := newEnv(t)
	g := newHoldGate()
	g.install(t, e)
	a := e.agent("a")
	released := false
	req := send("")
	req.Prepare = func(stdctx.Context) (agentcontroller.Prepared, error) {
		return agentcontroller.Prepared{Content: "hold", Release: func() { released = true }}, nil
	}
	ch := e.deliverAsync(stdctx.Background(), a, req)
	g.waitHolding(t)
	e.remove(a)
	close(g.release)
	r := wait(t, ch)
	if !errs.Has(r.err, agentcontroller.RejectedCode, agentcontroller.ReasonAgentGone) || !released {
		t.Fatalf("got %v, released %v", r.err, released)
	}
	// A delivery to an agent that is already gone fails the same way.
	if _, err := e.ctl.Deliver(stdctx.Background(), a, send("x")); !errs.Has(err, agentcontroller.RejectedCode, agentcontroller.ReasonAgentGone) {
		t.Fatalf("gone before: %v", err)
	}
}

func TestRefusalCarriesReasonMessageAndPresented(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, ad agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		return agentcontroller.Reject("my-plugin/not-ready", "Prepare the workspace first.", true), nil
	})
	released := 0
	req := send("")
	req.Prepare = func(stdctx.Context) (agentcontroller.Prepared, error) {
		return agentcontroller.Prepared{Content: "x", Release: func() { released++ }}, nil
	}
	_, err := e.ctl.Deliver(stdctx.Background(), a, req)
	if !agentcontroller.IsRejected(err) {
		t.Fatalf("not a refusal: %v", err)
	}
	ref, ok := agentcontroller.RefusalOf(err)
	if !ok || ref.Reason != "my-plugin/not-ready" || ref.Message != "Prepare the workspace first." || !ref.Presented {
		t.Fatalf("refusal %+v", ref)
	}
	if released != 1 || len(a.Messages()) != 0 {
		t.Fatalf("released %d inbox %v", released, a.Messages())
	}
	// Recognized by code after crossing a process boundary as JSON.
	b, _ := errs.Encode(err)
	back, _ := errs.Decode(b)
	if ref2, ok := agentcontroller.RefusalOf(back); !agentcontroller.IsRejected(back) || !ok || ref2 != ref {
		t.Fatalf("after JSON: %v %+v", back, ref2)
	}
}

func TestFailingListenerIsAdmissionFailed(t *testing.T) {
	for name, fn := range map[string]func() (agentcontroller.Decision, error){
		"error": func() (agentcontroller.Decision, error) { return agentcontroller.Decision{}, errors.New("db down") },
		"panic": func() (agentcontroller.Decision, error) { panic("db exploded") },
		"bad":   func() (agentcontroller.Decision, error) { return agentcontroller.Decision{Kind: "maybe"}, nil },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			a := e.agent("a")
			agentcontroller.EventAdmission.On(e.root, func(stdctx.Context, agentcontroller.Admission, agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
				return fn()
			})
			_, err := e.ctl.Deliver(stdctx.Background(), a, send("x"))
			if !errs.Has(err, agentcontroller.RejectedCode, agentcontroller.ReasonAdmissionFailed) {
				t.Fatalf("got %v", err)
			}
			if errors.Unwrap(err) == nil {
				t.Fatal("the failure must be the cause")
			}
			if len(a.Messages()) != 0 {
				t.Fatal("inserted anyway")
			}
		})
	}
}

func TestSenderHookErrorsPassThroughUnchanged(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	prepErr := errors.New("attachment too large")
	req := send("")
	req.Prepare = func(stdctx.Context) (agentcontroller.Prepared, error) { return agentcontroller.Prepared{}, prepErr }
	if _, err := e.ctl.Deliver(stdctx.Background(), a, req); err != prepErr {
		t.Fatalf("prepare error changed: %v", err)
	}
	hookErr := errors.New("bookkeeping failed")
	released := false
	var seen llm.Message
	req = send("")
	req.Prepare = func(stdctx.Context) (agentcontroller.Prepared, error) {
		return agentcontroller.Prepared{Content: "x", Release: func() { released = true }}, nil
	}
	req.BeforeInsert = func(m llm.Message) error { seen = m; return hookErr }
	if _, err := e.ctl.Deliver(stdctx.Background(), a, req); err != hookErr {
		t.Fatalf("BeforeInsert error changed: %v", err)
	}
	if len(a.Messages()) != 0 || !released || seen.Content != "x" || seen.ID == "" {
		t.Fatalf("inbox %v released %v seen %+v", a.Messages(), released, seen)
	}
	if _, err := e.ctl.Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: "sideways"}); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("bad mode: %v", err)
	}
	if _, err := e.ctl.Deliver(stdctx.Background(), nil, send("x")); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("nil agent: %v", err)
	}
}

func TestDisposeRejectsPendingAndWaitsForThem(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	holding := make(chan struct{})
	var listenerDone atomic.Bool
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, ad agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		close(holding)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // settle slowly: dispose must wait
		listenerDone.Store(true)
		return agentcontroller.Decision{}, ctx.Err()
	})
	held := e.deliverAsync(stdctx.Background(), a, send("held"))
	<-holding
	waiting := e.deliverAsync(stdctx.Background(), a, send("waiting"))
	waitQueue(t, e, "a", 2)
	e.fiber.Dispose(stdctx.Background())
	if !listenerDone.Load() {
		t.Fatal("dispose finished before the held delivery's listener settled")
	}
	for _, ch := range []chan result{held, waiting} {
		if r := wait(t, ch); !errs.Has(r.err, agentcontroller.RejectedCode, agentcontroller.ReasonStopped) {
			t.Fatalf("pending delivery got %v", r.err)
		}
	}
	if len(a.Messages()) != 0 {
		t.Fatal("inserted after stop")
	}
}

func TestScopedListenerHearsOnlyItsAgent(t *testing.T) {
	e := newEnv(t)
	a, b := e.agent("a"), e.agent("b")
	var heard []string
	agentcontroller.EventAdmission.On(a.Context(), func(ctx stdctx.Context, ad agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		heard = append(heard, ad.Agent.ID()+":"+ad.Message.Content)
		if ad.Source.IsUnattended() {
			return agentcontroller.Reject("test/no-robots", "a takes no unattended messages", false), nil
		}
		return next.Call(ctx, ad)
	})
	e.ctl.Deliver(stdctx.Background(), b, send("to b"))
	e.ctl.Deliver(stdctx.Background(), a, send("to a"))
	hook := send("from a webhook")
	hook.Source = agentcontroller.Source{Kind: agentcontroller.SourceWebhook}
	if _, err := e.ctl.Deliver(stdctx.Background(), a, hook); !agentcontroller.IsRejected(err) {
		t.Fatalf("unattended: %v", err)
	}
	if !slices.Equal(heard, []string{"a:to a", "a:from a webhook"}) {
		t.Fatalf("heard %v", heard)
	}
}

func TestRefusalJSONShape(t *testing.T) {
	err := agentcontroller.AgentAdmissionRejected("admission/rate-limited", "slow down", false, nil)
	b, _ := json.Marshal(err)
	if !strings.Contains(string(b), `"code":"AGENT_ADMISSION_REJECTED"`) || !strings.Contains(string(b), `"reason":"admission/rate-limited"`) {
		t.Fatalf("json %s", b)
	}
}

func TestListenerMayRewriteTheMessage(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, ad agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		ad.Message.Content = strings.ReplaceAll(ad.Message.Content, "hunter2", "[redacted]")
		return next.Call(ctx, ad)
	})
	var seen llm.Message
	req := send("my password is hunter2")
	req.BeforeInsert = func(m llm.Message) error { seen = m; return nil }
	id, err := e.ctl.Deliver(stdctx.Background(), a, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Messages(); len(got) != 1 || got[0] != "my password is [redacted]" || seen.ID != id {
		t.Fatalf("inbox %v, BeforeInsert saw %+v", got, seen)
	}
}

// TestAnUnattendedSourceMarksItsMessage: the message a schedule or webhook
// delivers carries Unattended, so the turn it starts never waits for a
// person; a user's does not.
func TestAnUnattendedSourceMarksItsMessage(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	marks := map[string]bool{}
	agentcontroller.EventInserted.On(e.root, func(_ stdctx.Context, in agentcontroller.Inserted) error {
		marks[in.Message.Content] = in.Message.Unattended
		return nil
	})
	tick := send("nightly run")
	tick.Source = agentcontroller.Source{Kind: agentcontroller.SourceSchedule}
	for _, r := range []agentcontroller.Request{send("from a person"), tick} {
		if _, err := e.ctl.Deliver(stdctx.Background(), a, r); err != nil {
			t.Fatal(err)
		}
	}
	if marks["from a person"] || !marks["nightly run"] {
		t.Fatalf("unattended marks %v", marks)
	}
}
