package waterfall_test

import (
	stdctx "context"
	"runtime"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/waterfall"
)

var cycleEvent = waterfall.New[int, int]("bench/cycle", nil)

// tenListeners registers ten listeners and one explicit effect.
var tenListeners = dshctx.Define("ten", func(ctx *dshctx.Context, _ any) error {
	for range 10 {
		if _, err := cycleEvent.On(ctx, passOn); err != nil {
			return err
		}
	}
	_, err := ctx.Effect("effect", func() (dshctx.Disposer, error) {
		return func() error { return nil }, nil
	})
	return err
})

func cycle(tb testing.TB, root *dshctx.Context) {
	f, err := root.Plugin(tenListeners, nil)
	if err != nil {
		tb.Fatal(err)
	}
	f.Dispose(stdctx.Background())
}

// BenchmarkFiberCycle applies and disposes a fiber with ten listeners and one
// effect.
func BenchmarkFiberCycle(b *testing.B) {
	root := quietRoot(b)
	b.ReportAllocs()
	for b.Loop() {
		cycle(b, root)
	}
}

// TestFiberCyclesLeaveNothingBehind runs 100,000 apply/dispose cycles and
// checks that the heap and goroutine count come back to where they were.
func TestFiberCyclesLeaveNothingBehind(t *testing.T) {
	root := quietRoot(t)
	n := 100_000
	if raceEnabled {
		n = 20_000 // the race detector makes each cycle ~10× slower
	}
	for range 1000 { // warm the pools and the listener store
		cycle(t, root)
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before, goroutines := heap(), runtime.NumGoroutine()
	for range n {
		cycle(t, root)
	}
	after := heap()
	if runtime.NumGoroutine() > goroutines {
		t.Fatalf("goroutines grew from %d to %d", goroutines, runtime.NumGoroutine())
	}
	// A leak of even one small object per cycle would be megabytes here.
	if after > before+256<<10 {
		t.Fatalf("heap grew from %d to %d bytes over %d cycles", before, after, n)
	}
	if r, _ := cycleEvent.Dispatch(stdctx.Background(), root, 0); r != 0 {
		t.Fatalf("listeners survived their fibers: %d", r)
	}
	if len(root.Fiber().Children()) != 0 {
		t.Fatalf("disposed fibers still linked to the root: %d", len(root.Fiber().Children()))
	}
}
