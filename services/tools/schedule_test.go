package tools_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

// newService is a tools service on a fresh root, disposed with the test.
func newService(t testing.TB) (*tools.Service, *dshctx.Context) {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	t.Cleanup(func() { root.Dispose(stdctx.Background()) })
	return tools.New(), root
}

func register(t testing.TB, s *tools.Service, at *dshctx.Context, name string, safe bool, run func(stdctx.Context, tools.Call) (tools.Result, error)) {
	t.Helper()
	if err := s.Register(at, tools.Tool{Name: name, ParallelSafe: safe, Execute: run}); err != nil {
		t.Fatal(err)
	}
}

func callsOf(names ...string) []tools.Call {
	out := make([]tools.Call, len(names))
	for i, n := range names {
		out[i] = tools.Call{ID: fmt.Sprintf("c%d", i), Name: n}
	}
	return out
}

// scheduleLog collects what Run reports, on Run's goroutine.
type scheduleLog struct {
	started []int
	order   []int
	outs    map[int]tools.Outcome
}

func (r *scheduleLog) schedule(limit int) tools.Schedule {
	r.outs = map[int]tools.Outcome{}
	return tools.Schedule{
		MaxParallel: limit,
		Start:       func(i int) bool { r.started = append(r.started, i); return true },
		Done:        func(i int, o tools.Outcome) { r.order = append(r.order, i); r.outs[i] = o },
	}
}

func within(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestRunReportsInCallOrder: parallel calls that finish last-first are
// still reported first-first, each with its own result.
func TestRunReportsInCallOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, root := newService(t)
	const n = 4
	release := make([]chan struct{}, n)
	finished := make(chan int, n)
	for i := range release {
		release[i] = make(chan struct{})
	}
	var entered sync.WaitGroup
	entered.Add(n)
	register(t, s, root, "p", true, func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
		var i int
		fmt.Sscanf(c.ID, "c%d", &i)
		entered.Done()
		<-release[i]
		defer func() { finished <- i }()
		return tools.Result{Content: "result of " + c.ID}, nil
	})
	var rec scheduleLog
	ran := make(chan error)
	go func() { ran <- s.Run(stdctx.Background(), root, callsOf("p", "p", "p", "p"), rec.schedule(0)) }()
	entered.Wait() // all four run at once
	var finishOrder []int
	for i := n - 1; i >= 0; i-- {
		close(release[i])
		finishOrder = append(finishOrder, <-finished)
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(finishOrder, []int{3, 2, 1, 0}) {
		t.Fatalf("the calls finished in %v; the test meant them to finish last-first", finishOrder)
	}
	if !slices.Equal(rec.order, []int{0, 1, 2, 3}) {
		t.Fatalf("reported in %v, want call order", rec.order)
	}
	for i := range n {
		if o := rec.outs[i]; !o.Ran || o.Err != nil || o.Result.Content != fmt.Sprintf("result of c%d", i) {
			t.Fatalf("call %d: %+v", i, o)
		}
	}
}

// TestRunRespectsTheCap: with a cap of 2, a third parallel-safe call starts
// only once one of the running ones returned, and two do run at once.
func TestRunRespectsTheCap(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, root := newService(t)
	const n, limit = 6, 2
	var exited atomic.Int32
	entered, release := make(chan struct{}, n), make(chan struct{})
	register(t, s, root, "p", true, func(stdctx.Context, tools.Call) (tools.Result, error) {
		entered <- struct{}{}
		<-release
		exited.Add(1)
		return tools.Result{Content: "ok"}, nil
	})
	var (
		violations []string
		started    int
	)
	sch := tools.Schedule{MaxParallel: limit, Start: func(i int) bool {
		// Runs on Run's goroutine before call i starts: the calls started
		// and not yet returned must leave room for it.
		if inFlight := started - int(exited.Load()); inFlight >= limit {
			violations = append(violations, fmt.Sprintf("call %d started with %d in flight", i, inFlight))
		}
		started++
		return true
	}}
	ran := make(chan error)
	go func() { ran <- s.Run(stdctx.Background(), root, callsOf("p", "p", "p", "p", "p", "p"), sch) }()
	within(t, entered, "the first call")
	within(t, entered, "the second call, beside the first")
	for range n - limit {
		release <- struct{}{}
		within(t, entered, "the call that took the freed slot")
	}
	for range limit {
		release <- struct{}{}
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if len(violations) > 0 || started != n {
		t.Fatalf("started %d calls; cap violations: %v", started, violations)
	}
}

// timeline records the start and end of each call, in the order they
// happened.
type timeline struct {
	mu     sync.Mutex
	events []string
}

func (l *timeline) add(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *timeline) at(e string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Index(l.events, e)
}

// barrier lets n calls through only once all n arrived, so calls that
// pass it provably ran at the same time; a serialized schedule fails it.
type barrier struct {
	mu   sync.Mutex
	left int
	all  chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{left: n, all: make(chan struct{})} }

func (b *barrier) arrive() error {
	b.mu.Lock()
	if b.left--; b.left == 0 {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("the other calls of the group never ran beside this one")
	}
}

// TestRunExclusiveSplitsGroups: in [p p x p p] the first two run
// together, x starts after both ended and runs alone, the last two start
// after x ended and run together.
func TestRunExclusiveSplitsGroups(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, root := newService(t)
	var tl timeline
	first, second := newBarrier(2), newBarrier(2)
	groups := map[string]*barrier{"c0": first, "c1": first, "c3": second, "c4": second}
	register(t, s, root, "p", true, func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
		tl.add("start " + c.ID)
		defer tl.add("end " + c.ID)
		if err := groups[c.ID].arrive(); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Content: "ok"}, nil
	})
	register(t, s, root, "x", false, func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
		tl.add("start " + c.ID)
		defer tl.add("end " + c.ID)
		return tools.Result{Content: "ok"}, nil
	})
	var rec scheduleLog
	if err := s.Run(stdctx.Background(), root, callsOf("p", "p", "x", "p", "p"), rec.schedule(0)); err != nil {
		t.Fatal(err)
	}
	for i, o := range rec.outs {
		if o.Err != nil || o.Result.IsError {
			t.Fatalf("call %d: %+v", i, o)
		}
	}
	before := func(a, b string) {
		if tl.at(a) < 0 || tl.at(b) < 0 || tl.at(a) > tl.at(b) {
			t.Fatalf("%q must come before %q; timeline %v", a, b, tl.events)
		}
	}
	before("end c0", "start c2")
	before("end c1", "start c2")
	before("end c2", "start c3")
	before("end c2", "start c4")
	if !slices.Equal(rec.order, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("reported in %v", rec.order)
	}
}

// TestRunUnknownToolRunsAlone: a call of a tool nobody registered waits
// for the calls before it (and is answered with an error result).
func TestRunUnknownToolRunsAlone(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, root := newService(t)
	var exited atomic.Int32
	entered, release := make(chan struct{}, 1), make(chan struct{})
	register(t, s, root, "p", true, func(stdctx.Context, tools.Call) (tools.Result, error) {
		entered <- struct{}{}
		<-release
		exited.Add(1)
		return tools.Result{Content: "ok"}, nil
	})
	var early bool
	var outs []tools.Outcome
	sch := tools.Schedule{
		Start: func(i int) bool {
			if i == 1 && exited.Load() == 0 {
				early = true
			}
			return true
		},
		Done: func(_ int, o tools.Outcome) { outs = append(outs, o) },
	}
	ran := make(chan error)
	go func() { ran <- s.Run(stdctx.Background(), root, callsOf("p", "nosuch"), sch) }()
	within(t, entered, "the known call")
	close(release)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if early {
		t.Fatal("the unknown tool's call started while the call before it ran")
	}
	if len(outs) != 2 || !outs[1].Ran || !outs[1].Result.IsError {
		t.Fatalf("outcomes %+v", outs)
	}
}

// gated is a tool that blocks until its context ends (or, when stubborn,
// until released, whatever its context says).
type gated struct {
	entered  chan string
	release  chan struct{}
	stubborn bool
}

func newGated(stubborn bool) *gated {
	return &gated{entered: make(chan string, 16), release: make(chan struct{}), stubborn: stubborn}
}

func (g *gated) run(ctx stdctx.Context, c tools.Call) (tools.Result, error) {
	g.entered <- c.ID
	if g.stubborn {
		<-g.release
		return tools.Result{Content: "done anyway"}, nil
	}
	select {
	case <-g.release:
		return tools.Result{Content: "released"}, nil
	case <-ctx.Done():
		return tools.Result{}, ctx.Err()
	}
}

func (g *gated) wait(t testing.TB) string {
	t.Helper()
	select {
	case id := <-g.entered:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("the gated tool was never called")
	}
	return ""
}

// TestRunStopsWhenCancelled: cancelling mid-group cancels the running
// calls; the later ones never start; every call is reported.
func TestRunStopsWhenCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, root := newService(t)
	g := newGated(false)
	register(t, s, root, "p", true, g.run)
	register(t, s, root, "x", false, g.run)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	var rec scheduleLog
	ran := make(chan error)
	go func() { ran <- s.Run(ctx, root, callsOf("p", "p", "x", "p"), rec.schedule(0)) }()
	g.wait(t)
	g.wait(t)
	cancel()
	if err := <-ran; !errors.Is(err, stdctx.Canceled) {
		t.Fatalf("Run returned %v, want the cancellation", err)
	}
	if !slices.Equal(rec.started, []int{0, 1}) || !slices.Equal(rec.order, []int{0, 1, 2, 3}) {
		t.Fatalf("started %v, reported %v", rec.started, rec.order)
	}
	for i := range 4 {
		o := rec.outs[i]
		if o.Ran != (i < 2) || !errors.Is(o.Err, stdctx.Canceled) {
			t.Fatalf("call %d: %+v", i, o)
		}
	}
}

// TestRunKeepsTheResultOfAToolThatIgnoresCancellation: Run waits for a
// running call that ignores its context, keeps what it returns, and starts
// nothing after the cancellation.
func TestRunKeepsTheResultOfAToolThatIgnoresCancellation(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, root := newService(t)
	g := newGated(true)
	register(t, s, root, "p", true, g.run)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	var rec scheduleLog
	ran := make(chan error)
	go func() { ran <- s.Run(ctx, root, callsOf("p", "p"), rec.schedule(1)) }()
	g.wait(t)
	cancel()
	close(g.release)
	if err := <-ran; err != nil {
		t.Fatalf("Run returned %v; the one call that ran returned normally", err)
	}
	if o := rec.outs[0]; !o.Ran || o.Result.Content != "done anyway" {
		t.Fatalf("the stubborn call's result was not kept: %+v", o)
	}
	if o := rec.outs[1]; o.Ran || !errors.Is(o.Err, stdctx.Canceled) {
		t.Fatalf("the call after the cancellation: %+v", o)
	}
}

// TestRunPanicCancelsTheGroup: a tool that panics beside others fails the
// step with ToolPanicked; its siblings are cancelled, later calls never
// start, every call is reported.
func TestRunPanicCancelsTheGroup(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, root := newService(t)
	g := newGated(false)
	register(t, s, root, "p", true, g.run)
	register(t, s, root, "boom", true, func(stdctx.Context, tools.Call) (tools.Result, error) {
		<-g.entered // panic once the sibling runs
		panic("tool bug")
	})
	var rec scheduleLog
	err := s.Run(stdctx.Background(), root, callsOf("boom", "p", "p"), rec.schedule(2))
	if !errs.HasCode(err, tools.ToolPanicked) {
		t.Fatalf("Run returned %v, want %s", err, tools.ToolPanicked)
	}
	if !slices.Equal(rec.order, []int{0, 1, 2}) || !slices.Equal(rec.started, []int{0, 1}) {
		t.Fatalf("started %v, reported %v", rec.started, rec.order)
	}
	if o := rec.outs[0]; !errs.HasCode(o.Err, tools.ToolPanicked) {
		t.Fatalf("the panicking call: %+v", o)
	}
	if o := rec.outs[1]; !o.Ran || !errors.Is(o.Err, stdctx.Canceled) {
		t.Fatalf("the sibling was not cancelled: %+v", o)
	}
	if o := rec.outs[2]; o.Ran || !errs.HasCode(o.Err, tools.ToolPanicked) {
		t.Fatalf("the call after the panic: %+v", o)
	}
}

// TestRunStartCanRefuse: a Start hook that says no stops the step there;
// the refused call and those after it are reported as not started.
func TestRunStartCanRefuse(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, root := newService(t)
	register(t, s, root, "x", false, func(stdctx.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: "ok"}, nil
	})
	var outs []tools.Outcome
	err := s.Run(stdctx.Background(), root, callsOf("x", "x", "x"), tools.Schedule{
		Start: func(i int) bool { return i == 0 },
		Done:  func(_ int, o tools.Outcome) { outs = append(outs, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 3 || !outs[0].Ran || outs[1].Ran || !errors.Is(outs[2].Err, tools.ErrNotStarted) {
		t.Fatalf("outcomes %+v", outs)
	}
}

// TestRunPanicCancelsTheCallRunOnTheCallersGoroutine: the last call of a
// group runs on Run's goroutine; a sibling that panics meanwhile still
// cancels it, and Run reports the panic, not the cancellation it caused.
func TestRunPanicCancelsTheCallRunOnTheCallersGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, root := newService(t)
	entered := make(chan struct{})
	register(t, s, root, "wait", true, func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
		close(entered)
		select {
		case <-ctx.Done():
			return tools.Result{}, ctx.Err()
		case <-time.After(10 * time.Second):
			return tools.Result{Content: "never cancelled"}, nil
		}
	})
	register(t, s, root, "boom", true, func(stdctx.Context, tools.Call) (tools.Result, error) {
		<-entered
		panic("tool bug")
	})
	var rec scheduleLog
	err := s.Run(stdctx.Background(), root, callsOf("boom", "wait"), rec.schedule(0))
	if !errs.HasCode(err, tools.ToolPanicked) {
		t.Fatalf("Run returned %v, want %s", err, tools.ToolPanicked)
	}
	if o := rec.outs[1]; !o.Ran || !errors.Is(o.Err, stdctx.Canceled) {
		t.Fatalf("the sibling was not cancelled: %+v", o)
	}
}
