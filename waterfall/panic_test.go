package waterfall_test

import (
	stdctx "context"
	"fmt"
	"strings"
	"sync"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/waterfall"
)

// chainOfPlugins registers n listeners on w, each in a plugin fiber of its
// own named "l1" … "ln", so an error can name the listener. Listener
// number bad panics with its name — before calling next, or after next
// returned when after is set. Given scopes, listener i is registered in
// scopes[i%len(scopes)], so a dispatch in a scope merges two lists.
func chainOfPlugins(t *testing.T, root *dshctx.Context, w *waterfall.Waterfall[int, int], n, bad int, after bool, scopes ...*dshctx.Context) {
	t.Helper()
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("l%d", i)
		at := root
		if len(scopes) > 0 {
			at = scopes[i%len(scopes)]
		}
		f, err := at.Plugin(dshctx.Define(name, func(ctx *dshctx.Context, _ any) error {
			_, err := w.On(ctx, func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
				if i == bad && !after {
					panic("broke in " + name)
				}
				r, err := next.Call(c, p+1)
				if i == bad {
					panic("broke in " + name)
				}
				return r, err
			})
			return err
		}), nil)
		if err == nil {
			err = f.Await(stdctx.Background())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A panic deep in a chain is reported as the panicking listener's, not as
// one of the listeners around it: the one recover of the dispatch must
// still know which listener was running, whether it panicked on its way in
// (before next) or on its way out (after next returned, the listeners
// after it done).
func TestPanicInTheTenthOfSixteenIsAttributedToIt(t *testing.T) {
	for _, tc := range []struct {
		after, scoped bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("after-next=%v,scoped=%v", tc.after, tc.scoped), func(t *testing.T) {
			root := quietRoot(t)
			w := waterfall.New[int, int]("test/tenth", func(_ stdctx.Context, p int) (int, error) { return p, nil })
			at := root
			if tc.scoped {
				scope, err := root.Scoped("agent")
				if err != nil {
					t.Fatal(err)
				}
				at = scope
				chainOfPlugins(t, root, w, 16, 10, tc.after, root, scope)
			} else {
				chainOfPlugins(t, root, w, 16, 10, tc.after)
			}
			for range 3 { // and again: nothing of the panic stays in the pooled state
				r, err := w.Dispatch(stdctx.Background(), at, 0)
				if r != 0 || !errs.HasCode(err, errs.ListenerFailed) {
					t.Fatalf("got %d, %v; want LISTENER_FAILED", r, err)
				}
				for _, want := range []string{`"test/tenth"`, `fiber "l10"`, "broke in l10"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("error lacks %s: %v", want, err)
					}
				}
			}
		})
	}
}

// A panic unwinds the listeners outside it on the dispatching goroutine:
// what they deferred runs, what follows their next does not, and the
// dispatch that follows runs the whole chain again.
func TestPanicUnwindsTheListenersOutsideIt(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/unwind", func(_ stdctx.Context, p int) (int, error) { return p, nil })
	var deferred, afterNext int
	w.On(root, func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		defer func() { deferred++ }()
		r, err := next.Call(c, p+1)
		afterNext++
		return r, err
	})
	boom := true
	w.On(root, func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		if boom {
			panic("boom")
		}
		return next.Call(c, p+1)
	})
	if _, err := w.Dispatch(stdctx.Background(), root, 0); !errs.HasCode(err, errs.ListenerFailed) {
		t.Fatalf("want LISTENER_FAILED, got %v", err)
	}
	wantAfter := 0
	if !waterfall.UnwindsOnPanic {
		wantAfter = 1 // every hop recovers: the panic is next's error
	}
	if deferred != 1 || afterNext != wantAfter {
		t.Fatalf("outer listener: deferred ran %d times, code after next %d times", deferred, afterNext)
	}
	boom = false
	if r, err := w.Dispatch(stdctx.Background(), root, 0); r != 2 || err != nil {
		t.Fatalf("after the panic: %d %v", r, err)
	}
}

// A listener that runs the rest of the chain on a goroutine of its own and
// waits for it: a panic further down is that goroutine's next's error,
// named after the listener that panicked, and the listener that waited
// sees it as an error instead of being unwound — nothing on the
// dispatching goroutine recovers what panics elsewhere.
func TestPanicOnAnotherGoroutineIsThatNextsError(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/elsewhere", func(_ stdctx.Context, p int) (int, error) { return p, nil })
	var seen error
	w.On(root, func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		var r int
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			r, err = next.Call(c, p+1)
		}()
		<-done
		seen = err
		return r, err
	})
	chainOfPlugins(t, root, w, 4, 3, false)
	_, err := w.Dispatch(stdctx.Background(), root, 0)
	if !errs.HasCode(err, errs.ListenerFailed) || !strings.Contains(err.Error(), `fiber "l3"`) {
		t.Fatalf("dispatch: %v", err)
	}
	if seen != err {
		t.Fatalf("the waiting listener saw %v, the dispatch returned %v", seen, err)
	}
}

// A next kept past its listener's return and called from another
// goroutine is refused — while other dispatches of the event run on the
// pooled state it once belonged to — and, run with -race, touches nothing
// those dispatches write.
func TestKeptNextCalledFromAnotherGoroutineIsRefused(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/kept-elsewhere", func(_ stdctx.Context, p int) (int, error) { return p, nil })
	kept := make(chan waterfall.Next[int, int], 64)
	w.On(root, func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		if p < 0 {
			kept <- next
			return -1, nil
		}
		return next.Call(c, p+1)
	})
	w.On(root, passOn)
	for range cap(kept) {
		if r, err := w.Dispatch(stdctx.Background(), root, -5); r != -1 || err != nil {
			t.Fatalf("keeping dispatch: %d %v", r, err)
		}
	}
	close(kept)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				if r, err := w.Dispatch(stdctx.Background(), root, g+i); r != g+i+2 || err != nil {
					t.Errorf("dispatch: %d %v", r, err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for next := range kept {
			_, err := next.Call(stdctx.Background(), 1)
			if !errs.HasCode(err, errs.NextMisuse) || !strings.Contains(err.Error(), "after the dispatch") {
				t.Errorf("a kept next: %v", err)
			}
		}
	}()
	wg.Wait()
}

// A next used twice, once on the listener's goroutine and once on
// another, one call after the other, is NEXT_MISUSE whichever goroutine
// called it first: hops on either goroutine enter their step by the same
// swap, so the second finds it entered.
func TestNextTwiceAcrossGoroutinesIsMisuse(t *testing.T) {
	for _, elsewhereFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("elsewhere-first=%v", elsewhereFirst), func(t *testing.T) {
			root := quietRoot(t)
			w := waterfall.New[int, int]("test/twice-across", func(_ stdctx.Context, p int) (int, error) { return p, nil })
			onAnother := func(next waterfall.Next[int, int], c stdctx.Context, p int) (int, error) {
				var r int
				var err error
				done := make(chan struct{})
				go func() {
					defer close(done)
					r, err = next.Call(c, p)
				}()
				<-done
				return r, err
			}
			var second error
			w.On(root, func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
				if elsewhereFirst {
					r, err := onAnother(next, c, p+1)
					_, second = next.Call(c, p+1)
					return r, err
				}
				r, err := next.Call(c, p+1)
				_, second = onAnother(next, c, p+1)
				return r, err
			})
			w.On(root, passOn)
			w.On(root, passOn)
			r, err := w.Dispatch(stdctx.Background(), root, 0)
			if r != 3 || err != nil {
				t.Fatalf("first call: %d %v", r, err)
			}
			if !errs.HasCode(second, errs.NextMisuse) || !strings.Contains(second.Error(), "twice") {
				t.Fatalf("second call: %v", second)
			}
		})
	}
}
