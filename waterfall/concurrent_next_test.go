package waterfall_test

import (
	stdctx "context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	"github.com/dsh-go/dsh/waterfall"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

// A listener calls its next from two goroutines at the same moment — its
// own and another, or two others — thousands of times. The rest of the
// chain must run exactly once a dispatch: one call gets its result, the
// other NEXT_MISUSE. Run with -race, this is also the test that the two
// calls share no plain memory: a hop on the dispatching goroutine that
// skipped the atomic swap (branch waterfall) fails it.
func TestNextCalledAtOnceFromTwoGoroutinesRunsTheRestOnce(t *testing.T) {
	dispatches := 3000
	if raceEnabled {
		dispatches = 1000
	}
	for _, tc := range []struct {
		name       string
		ownerCalls bool // one of the two calls is on the listener's own goroutine
		keep       bool // the event has Keep, whose hops read the dispatch's payload
	}{
		{"listener-and-another", true, false},
		{"two-others", false, false},
		{"listener-and-another-with-keep", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := quietRoot(t)
			w := waterfall.New[int, int]("test/next-at-once", func(_ stdctx.Context, p int) (int, error) { return p, nil })
			if tc.keep {
				w.Keep(func(_, passed int) int { return passed })
			}
			var restRuns atomic.Int64
			var misuses atomic.Int64
			w.On(root, func(ctx stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
				type result struct {
					r   int
					err error
				}
				start := make(chan struct{})
				results := make(chan result, 2)
				call := func() {
					<-start
					r, err := next.Call(ctx, p+1)
					results <- result{r, err}
				}
				go call()
				if tc.ownerCalls {
					close(start)
					r, err := next.Call(ctx, p+1)
					results <- result{r, err}
				} else {
					go call()
					close(start)
				}
				var won result
				wins := 0
				for range 2 {
					res := <-results
					switch {
					case res.err == nil:
						won = res
						wins++
					case errs.HasCode(res.err, errs.NextMisuse) && strings.Contains(res.err.Error(), "twice"):
						misuses.Add(1)
					default:
						return 0, fmt.Errorf("a next called at once: %w", res.err)
					}
				}
				if wins != 1 {
					return 0, fmt.Errorf("%d of the two calls ran the rest of the chain", wins)
				}
				return won.r, nil
			})
			w.On(root, func(ctx stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
				restRuns.Add(1)
				return next.Call(ctx, p+1)
			})
			for i := range dispatches {
				r, err := w.Dispatch(stdctx.Background(), root, i)
				if err != nil || r != i+2 {
					t.Fatalf("dispatch %d: %d %v", i, r, err)
				}
			}
			if got := restRuns.Load(); got != int64(dispatches) {
				t.Fatalf("the rest of the chain ran %d times in %d dispatches", got, dispatches)
			}
			if got := misuses.Load(); got != int64(dispatches) {
				t.Fatalf("%d calls were refused in %d dispatches", got, dispatches)
			}
		})
	}
}

// A panic three listeners deep, each in a plugin of its own, reaches the
// dispatcher as LISTENER_FAILED with the panic reason, naming the event,
// the panicking listener's fiber and the panic, however the chain got
// there: every hop on the dispatching goroutine, the panic raised after
// the listener's own next returned, or the chain handed to a goroutine
// the first listener waits for. Nothing it leaves runs on: no goroutine
// stays behind, and the event dispatches cleanly afterwards.
func TestPanicInANestedListenerReachesTheDispatcher(t *testing.T) {
	for _, tc := range []struct {
		name               string
		afterNext, handOff bool
	}{
		{"on-the-way-in", false, false},
		{"on-the-way-out", true, false},
		{"on-another-goroutine", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			root := quietRoot(t)
			w := waterfall.New[int, int]("test/nested-panic", func(_ stdctx.Context, p int) (int, error) { return p, nil })
			var outerAfterNext atomic.Int32
			w.On(root, func(ctx stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
				if !tc.handOff {
					r, err := next.Call(ctx, p+1)
					outerAfterNext.Add(1)
					return r, err
				}
				var r int
				var err error
				done := make(chan struct{})
				go func() {
					defer close(done)
					r, err = next.Call(ctx, p+1)
				}()
				<-done
				return r, err
			})
			chainOfPlugins(t, root, w, 3, 2, tc.afterNext)
			fibers := len(root.Fiber().Children())
			for range 3 {
				r, err := w.Dispatch(stdctx.Background(), root, 0)
				if r != 0 || !errs.HasCode(err, errs.ListenerFailed) || errs.ReasonOf(err) != "event/panic" {
					t.Fatalf("got %d, %v (reason %q); want LISTENER_FAILED, event/panic", r, err, errs.ReasonOf(err))
				}
				for _, want := range []string{`"test/nested-panic"`, `fiber "l2"`, "broke in l2"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("error lacks %s: %v", want, err)
					}
				}
			}
			// On the dispatching goroutine the panic unwinds the outer
			// listener; on another, that goroutine's next returns it.
			// Where the dispatch cannot tell its goroutine's hops from
			// others, every hop recovers and returns it as next's error.
			want := int32(0)
			if !waterfall.UnwindsOnPanic && !tc.handOff {
				want = 3
			}
			if n := outerAfterNext.Load(); n != want {
				t.Fatalf("the outer listener went on after its next %d times, want %d", n, want)
			}
			if len(root.Fiber().Children()) != fibers {
				t.Fatal("a panic changed the fibers")
			}
			runtime.Gosched()
		})
	}
}

// A panic on the dispatching goroutine leaves the pooled dispatch state
// clean: the next dispatch of the same event from the same goroutine, which
// gets the same state back, runs the whole chain and attributes nothing to
// the listener that panicked before.
func TestDispatchAfterAPanicStartsClean(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/after-panic", func(_ stdctx.Context, p int) (int, error) { return p, nil })
	boom := atomic.Bool{}
	w.On(root, passOn)
	f, err := root.Plugin(dshctx.Define("sometimes", func(ctx *dshctx.Context, _ any) error {
		_, err := w.On(ctx, func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
			if boom.Load() {
				panic("now")
			}
			return next.Call(c, p+1)
		})
		return err
	}), nil)
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	w.On(root, func(c stdctx.Context, p int, _ waterfall.Next[int, int]) (int, error) {
		if p != 2 {
			panic(fmt.Sprintf("the last listener got %d", p))
		}
		return p, nil
	})
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				if g == 0 && i%5 == 0 {
					boom.Store(true)
				} else if g == 0 {
					boom.Store(false)
				}
				r, err := w.Dispatch(stdctx.Background(), root, 0)
				if err == nil && r != 2 {
					t.Errorf("dispatch: %d", r)
					return
				}
				if err != nil && (!errs.HasCode(err, errs.ListenerFailed) || !strings.Contains(err.Error(), `fiber "sometimes"`)) {
					t.Errorf("dispatch: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestATracedPanicUnwindsWhetherSampledOrNot: a listener of a Traced event
// panics. Sampled or sampled out, the dispatch fails with LISTENER_FAILED
// naming it, and the listener outside is unwound the same way: its code
// after next does not run, its defer does. (A sampled hop used to recover
// for its span, so cleanup written after next ran only when sampled.)
func TestATracedPanicUnwindsWhetherSampledOrNot(t *testing.T) {
	on := true
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: &on})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(stdctx.Background())
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/traced-panic", func(_ stdctx.Context, p int) (int, error) { return p, nil }).Traced()
	var after, deferred int
	w.On(root, func(ctx stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		defer func() { deferred++ }()
		r, err := next.Call(ctx, p+1)
		after++
		return r, err
	})
	chainOfPlugins(t, root, w, 3, 2, false)
	sampled, span := telemetry.Start(stdctx.Background(), "test")
	defer span.End()
	if !telemetry.Records(sampled) {
		t.Fatal("the sampled context does not record")
	}
	notSampled := oteltrace.ContextWithSpanContext(stdctx.Background(), oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: oteltrace.TraceID{1}, SpanID: oteltrace.SpanID{1}, Remote: true}))
	if telemetry.Records(notSampled) {
		t.Fatal("the sampled-out context records")
	}
	for _, c := range []struct {
		name string
		ctx  stdctx.Context
	}{{"sampled", sampled}, {"sampled out", notSampled}} {
		after, deferred = 0, 0
		_, err := w.Dispatch(c.ctx, root, 0)
		if !errs.HasCode(err, errs.ListenerFailed) || !strings.Contains(err.Error(), `fiber "l2"`) {
			t.Fatalf("%s: dispatch: %v", c.name, err)
		}
		if after != 0 || deferred != 1 {
			t.Fatalf("%s: the outer listener ran its code after next %d times and its defer %d; want 0 and 1", c.name, after, deferred)
		}
	}
	// And without a panic the traced chain runs through.
	w2 := waterfall.New[int, int]("test/traced-pass", func(_ stdctx.Context, p int) (int, error) { return p, nil }).Traced()
	w2.On(root, passOn)
	w2.On(root, passOn)
	if r, err := w2.Dispatch(sampled, root, 0); r != 2 || err != nil {
		t.Fatalf("traced dispatch: %d %v", r, err)
	}
}
