package waterfall_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/waterfall"
)

// onPlugin registers fn on w in a plugin fiber of its own named name, so
// that a panic's error can name it.
func onPlugin(t *testing.T, root *dshctx.Context, w *waterfall.Waterfall[int, int], name string, fn waterfall.Listener[int, int]) {
	t.Helper()
	f, err := root.Plugin(dshctx.Define(name, func(ctx *dshctx.Context, _ any) error {
		_, err := w.On(ctx, fn)
		return err
	}), nil)
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
}

func wantPanicOf(t *testing.T, err error, event, fiber string) {
	t.Helper()
	if !errs.HasCode(err, errs.ListenerFailed) {
		t.Fatalf("want LISTENER_FAILED, got %v", err)
	}
	for _, want := range []string{fmt.Sprintf("%q", event), fmt.Sprintf("fiber %q", fiber)} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error lacks %s: %v", want, err)
		}
	}
}

// A panic deep in a long chain is named after the listener that panicked,
// not one of the many still running around it.
func TestPanicInALongChainIsAttributedToIt(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("after-next=%v", after), func(t *testing.T) {
			root := quietRoot(t)
			w := waterfall.New[int, int]("test/long", func(_ stdctx.Context, p int) (int, error) { return p, nil })
			chainOfPlugins(t, root, w, 150, 140, after)
			_, err := w.Dispatch(stdctx.Background(), root, 0)
			wantPanicOf(t, err, "test/long", "l140")
		})
	}
}

// A listener that calls next through a method value adds a call of its
// own between the hops; the panic after it is still the next listener's.
func TestPanicAfterNextCalledAsAMethodValue(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/method-value", func(_ stdctx.Context, p int) (int, error) { return p, nil })
	for _, name := range []string{"l1", "l2"} {
		onPlugin(t, root, w, name, func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
			call := next.Call
			return call(c, p+1)
		})
	}
	onPlugin(t, root, w, "l3", func(stdctx.Context, int, waterfall.Next[int, int]) (int, error) {
		panic("broke in l3")
	})
	onPlugin(t, root, w, "l4", passOn)
	_, err := w.Dispatch(stdctx.Background(), root, 0)
	wantPanicOf(t, err, "test/method-value", "l3")
}

// A chain that went to another goroutine and came back to the dispatching
// one, by a next handed back to it, no longer runs nested there: the
// listener that panics after that is named all the same. l1 runs the rest
// on a goroutine, l2 (there) hands its next back to l1, which calls it on
// the dispatching goroutine, and l3 panics. Naming by what runs nested on
// that goroutine alone would name l2.
func TestPanicAfterTheChainCameBackIsAttributedToIt(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/came-back", func(_ stdctx.Context, p int) (int, error) { return p, nil })
	handoff := make(chan waterfall.Next[int, int])
	var wg sync.WaitGroup
	defer wg.Wait()
	onPlugin(t, root, w, "l1", func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		gone := make(chan struct{})
		defer close(gone)
		wg.Add(1)
		go func() {
			defer wg.Done()
			next.Call(c, p+1)
		}()
		select {
		case back := <-handoff:
			return back.Call(c, p+2)
		case <-c.Done():
			return 0, c.Err()
		}
	})
	onPlugin(t, root, w, "l2", func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		handoff <- next
		return 0, errors.New("l2 handed its next back")
	})
	onPlugin(t, root, w, "l3", func(stdctx.Context, int, waterfall.Next[int, int]) (int, error) {
		panic("broke in l3")
	})
	for range 3 { // and again: offOwner ends with its dispatch
		_, err := w.Dispatch(stdctx.Background(), root, 0)
		wantPanicOf(t, err, "test/came-back", "l3")
	}
}

// After a dispatch whose chain left its goroutine, the next dispatch
// through the same pooled state still names a panic right: what the first
// dispatch learned about its chain does not outlive it.
func TestAChainThatLeftItsGoroutineDoesNotMisnameTheNextDispatch(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/off-owner", func(_ stdctx.Context, p int) (int, error) { return p, nil })
	elsewhere := true
	onPlugin(t, root, w, "l1", func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		if !elsewhere {
			return next.Call(c, p+1)
		}
		var r int
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			r, err = next.Call(c, p+1)
		}()
		<-done
		return r, err
	})
	boom := false
	onPlugin(t, root, w, "l2", func(c stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		if boom {
			panic("broke in l2")
		}
		return next.Call(c, p+1)
	})
	onPlugin(t, root, w, "l3", passOn)
	if r, err := w.Dispatch(stdctx.Background(), root, 0); r != 3 || err != nil {
		t.Fatalf("elsewhere: %d %v", r, err)
	}
	elsewhere = false
	if r, err := w.Dispatch(stdctx.Background(), root, 0); r != 3 || err != nil {
		t.Fatalf("on the dispatching goroutine: %d %v", r, err)
	}
	boom = true
	_, err := w.Dispatch(stdctx.Background(), root, 0)
	wantPanicOf(t, err, "test/off-owner", "l2")
}
