package waterfall_test

import (
	stdctx "context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/waterfall"
)

type letter struct{ From, Text string }

// keepFrom is the Keep of the tests: the sender is the dispatcher's.
func keepFrom(orig, passed letter) letter {
	passed.From = orig.From
	return passed
}

// A listener that passes the payload on with another sender changes
// nothing of the sender the listeners after it and the default see; what
// else it changed goes on.
func TestKeepHoldsWhatNoListenerMayChange(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New("test/keep", func(_ stdctx.Context, l letter) (string, error) {
		return "default saw " + l.From + ": " + l.Text, nil
	}).Keep(keepFrom)
	var seen []string
	w.On(root, func(ctx stdctx.Context, l letter, next waterfall.Next[letter, string]) (string, error) {
		l.From, l.Text = "root", "[redacted]"
		return next.Call(ctx, l)
	})
	w.On(root, func(ctx stdctx.Context, l letter, next waterfall.Next[letter, string]) (string, error) {
		seen = append(seen, l.From)
		l.From = "admin"
		return next.Call(ctx, l)
	})
	got, err := w.Dispatch(stdctx.Background(), root, letter{From: "mallory", Text: "hi"})
	if err != nil || got != "default saw mallory: [redacted]" || len(seen) != 1 || seen[0] != "mallory" {
		t.Fatalf("got %q %v, the second listener saw %v", got, err, seen)
	}
}

// A next called after its dispatch ended fails as on any waterfall, and
// the next dispatch keeps its own original.
func TestKeepWithANextCalledLate(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[letter, string]("test/keep-late", func(_ stdctx.Context, l letter) (string, error) {
		return l.From, nil
	}).Keep(keepFrom)
	var kept waterfall.Next[letter, string]
	w.On(root, func(ctx stdctx.Context, l letter, next waterfall.Next[letter, string]) (string, error) {
		if l.Text == "keep" {
			kept = next
			return "", nil
		}
		return next.Call(ctx, l)
	})
	w.Dispatch(stdctx.Background(), root, letter{From: "alice", Text: "keep"})
	if got, err := w.Dispatch(stdctx.Background(), root, letter{From: "bob"}); got != "bob" || err != nil {
		t.Fatalf("second dispatch: %q %v", got, err)
	}
	if _, err := kept.Call(stdctx.Background(), letter{From: "eve"}); !errs.HasCode(err, errs.NextMisuse) {
		t.Fatalf("a late next: %v", err)
	}
}

// Listeners that give up on a next still running on another goroutine,
// while dispatches follow one another through the same pooled state: a
// late hop sees its own dispatch's original or fails, never another's
// (and the race detector sees no read of an original being rewritten).
func TestKeepWithNextsRunningPastTheirDispatch(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[letter, string]("test/keep-race", func(_ stdctx.Context, l letter) (string, error) {
		return l.From, nil
	}).Keep(keepFrom)
	var wg sync.WaitGroup
	var wrong atomic.Int32
	w.On(root, func(ctx stdctx.Context, l letter, next waterfall.Next[letter, string]) (string, error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := next.Call(ctx, letter{From: "eve", Text: l.From})
			if err == nil && got != l.From {
				wrong.Add(1)
			}
		}()
		return "gave up", nil
	})
	for i := range 2000 {
		w.Dispatch(stdctx.Background(), root, letter{From: fmt.Sprint("sender-", i)})
	}
	wg.Wait()
	if n := wrong.Load(); n != 0 {
		t.Fatalf("%d late hops saw another dispatch's sender", n)
	}
}
