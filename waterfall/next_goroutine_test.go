package waterfall_test

import (
	stdctx "context"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/waterfall"
)

// TestNextFromAGoroutineAfterGivingUpIsMisuse is the "give up on timeout"
// pattern: a listener hands next to a goroutine, stops waiting for it and
// returns its own result. The goroutine's late next must come back as
// NEXT_MISUSE while other dispatches of the same event run, and -race must
// find nothing: a late next never touches another dispatch's state.
func TestNextFromAGoroutineAfterGivingUpIsMisuse(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/give-up", func(_ stdctx.Context, p int) (int, error) { return p, nil })
	var late sync.WaitGroup
	gate := make(chan struct{})
	results := make(chan error, 64)
	w.On(root, func(ctx stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		if p != 1 {
			return next.Call(ctx, p)
		}
		late.Add(1)
		go func() {
			defer late.Done()
			<-gate
			_, err := next.Call(ctx, p)
			results <- err
		}()
		return -1, nil // gave up without waiting for next
	})
	w.On(root, passOn)
	for range 32 {
		if r, err := w.Dispatch(stdctx.Background(), root, 1); r != -1 || err != nil {
			t.Fatalf("giving-up dispatch: %d %v", r, err)
		}
	}
	// The late nexts run while other dispatches reuse whatever state the
	// event keeps between dispatches.
	var busy sync.WaitGroup
	for range 2 {
		busy.Add(1)
		go func() {
			defer busy.Done()
			for range 2000 {
				if r, err := w.Dispatch(stdctx.Background(), root, 5); r != 6 || err != nil {
					t.Errorf("concurrent dispatch: %d %v", r, err)
					return
				}
			}
		}()
	}
	close(gate)
	late.Wait()
	busy.Wait()
	close(results)
	for err := range results {
		if !errs.HasCode(err, errs.NextMisuse) {
			t.Fatalf("late next returned %v, want NEXT_MISUSE", err)
		}
	}
}

// TestNextRacingTheListenersReturnIsRaceFree calls next on a goroutine at
// the moment its listener returns. Either the goroutine wins and runs the
// rest of the chain, whose result nobody reads, or it is told NEXT_MISUSE;
// under -race neither may be a data race, and a panic further down the
// detached chain is an error on that goroutine, not a crash.
func TestNextRacingTheListenersReturnIsRaceFree(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/racing-next", nil)
	var wg sync.WaitGroup
	w.On(root, func(ctx stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := next.Call(ctx, p)
			if err != nil && !errs.HasCode(err, errs.NextMisuse) && !errs.HasCode(err, errs.ListenerFailed) {
				t.Errorf("racing next: %v", err)
			}
		}()
		return -1, nil
	})
	w.On(root, passOn)
	w.On(root, func(_ stdctx.Context, p int, _ waterfall.Next[int, int]) (int, error) {
		if p%7 == 0 {
			panic("deep listener broke")
		}
		return p, nil
	})
	for i := range 500 {
		if r, err := w.Dispatch(stdctx.Background(), root, i); r != -1 || err != nil {
			t.Fatalf("dispatch: %d %v", r, err)
		}
	}
	wg.Wait()
}
