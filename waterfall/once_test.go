package waterfall_test

import (
	stdctx "context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/waterfall"
)

func TestOnceRunsForOneDispatchThenGoes(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/once", func(_ stdctx.Context, p int) (int, error) { return p, nil })
	var runs atomic.Int32
	if _, err := w.Once(root, func(ctx stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
		runs.Add(1)
		return next.Call(ctx, p*10)
	}); err != nil {
		t.Fatal(err)
	}
	w.On(root, passOn)
	var wg sync.WaitGroup
	results := make(chan int, 40)
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := w.Dispatch(stdctx.Background(), root, 1)
			if err != nil {
				t.Error(err)
			}
			results <- r
		}()
	}
	wg.Wait()
	close(results)
	var changed int
	for r := range results {
		if r == 11 {
			changed++
		} else if r != 2 {
			t.Fatalf("dispatch returned %d, want 11 once and 2 otherwise", r)
		}
	}
	if runs.Load() != 1 || changed != 1 {
		t.Fatalf("the once listener ran %d times and changed %d results", runs.Load(), changed)
	}
	// It removed itself: a dispatch now sees only passOn.
	if r, _ := w.Dispatch(stdctx.Background(), root, 1); r != 2 {
		t.Fatalf("after once: %d", r)
	}
}

func TestOnceOffBeforeItRanAndEmitOnce(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/once-off", nil)
	off, err := w.Once(root, func(stdctx.Context, int, waterfall.Next[int, int]) (int, error) { return 99, nil })
	if err != nil {
		t.Fatal(err)
	}
	off()
	off()
	if r, _ := w.Dispatch(stdctx.Background(), root, 1); r != 0 {
		t.Fatalf("a removed once listener ran: %d", r)
	}
	if _, err := w.Once(root, nil); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("nil once listener: %v", err)
	}

	e := waterfall.NewEmit[string]("test/emit-once")
	var heard []string
	e.Once(root, func(_ stdctx.Context, s string) error { heard = append(heard, s); return nil })
	e.Emit(stdctx.Background(), root, "a")
	e.Emit(stdctx.Background(), root, "b")
	if len(heard) != 1 || heard[0] != "a" {
		t.Fatalf("emit once heard %v", heard)
	}
}
