package waterfall_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

func quietRoot(tb testing.TB) *dshctx.Context {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(tb, root)
	return root
}

func passOn(ctx stdctx.Context, p int, next waterfall.Next[int, int]) (int, error) {
	return next.Call(ctx, p+1)
}

// hopCounts are the chain lengths of BenchmarkWaterfall and its floors; the
// cost of a hop is the slope of cpu-ns/op between two of them, which
// leaves the fixed cost of a dispatch out.
var hopCounts = []int{1, 4, 16}

// BenchmarkWaterfall measures a dispatch through n listeners that each call
// next. ns/hop is ns/op divided by n, which still carries the dispatch's
// fixed cost; the cost of one hop is the slope of cpu-ns/op between two n,
// set against BenchmarkHopFloor's slopes in the same run.
//
// ctx=cancellable dispatches with a context that can be cancelled, as a
// request's is, which every hop checks.
func BenchmarkWaterfall(b *testing.B) {
	for _, n := range hopCounts {
		b.Run(fmt.Sprintf("listeners=%d", n), func(b *testing.B) { benchmarkChain(b, n, stdctx.Background()) })
	}
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	for _, n := range hopCounts {
		b.Run(fmt.Sprintf("ctx=cancellable/listeners=%d", n), func(b *testing.B) { benchmarkChain(b, n, ctx) })
	}
}

func benchmarkChain(b *testing.B, n int, ctx stdctx.Context) {
	root := quietRoot(b)
	w := waterfall.New[int, int]("bench/chain", func(_ stdctx.Context, p int) (int, error) { return p, nil })
	for range n {
		if _, err := w.On(root, passOn); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if r, _ := w.Dispatch(ctx, root, 0); r != n {
			b.Fatalf("got %d", r)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/hop")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// floorNext is the closure floor's next: the rest of a chain of closures.
type floorNext func(ctx stdctx.Context, p int) (int, error)

// casChain is the CAS floor's dispatch: listeners called through a slice,
// and the word every hop swaps.
type casChain struct {
	state atomic.Uint64
	fns   []func(ctx stdctx.Context, p int, next casNext) (int, error)
	ofns  []func(ctx stdctx.Context, p int, next ownedNext) (int, error)
	cfns  []func(ctx stdctx.Context, p int, next ownedCtxNext) (int, error)
}

// ownedChain is the floor of a hop that is race-free and contains a panic
// without a recover of its own: it knows the goroutine that dispatched, and
// each hop compares it with its own before the swap.
type ownedChain struct {
	owner atomic.Uintptr
	casChain
}

// ownedNext is the owned floor's next, three words like waterfall.Next.
type ownedNext struct {
	c   *ownedChain
	i   uint64
	gen uint64
}

var errForeignFloor = errors.New("owned floor: a hop on another goroutine")

func (n ownedNext) Call(ctx stdctx.Context, p int) (int, error) {
	c := n.c
	if c.owner.Load() != waterfall.Curg() {
		return 0, errForeignFloor
	}
	k := n.gen + n.i
	if !c.state.CompareAndSwap(k, k+1) {
		return 0, errCASFloor
	}
	if n.i >= uint64(len(c.ofns)) {
		return p, nil
	}
	fn := c.ofns[n.i]
	n.i++
	return fn(ctx, p, n)
}

// ownedCtxNext is ownedNext checking a cancellable ctx before each
// listener, as a hop must when the dispatch's context can be cancelled.
type ownedCtxNext ownedNext

func (n ownedCtxNext) Call(ctx stdctx.Context, p int) (int, error) {
	c := n.c
	if c.owner.Load() != waterfall.Curg() {
		return 0, errForeignFloor
	}
	k := n.gen + n.i
	if !c.state.CompareAndSwap(k, k+1) {
		return 0, errCASFloor
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if n.i >= uint64(len(c.cfns)) {
		return p, nil
	}
	fn := c.cfns[n.i]
	n.i++
	return fn(ctx, p, n)
}

// casNext is the CAS floor's next, three words like waterfall.Next.
type casNext struct {
	c   *casChain
	i   uint64
	gen uint64
}

var errCASFloor = errors.New("cas floor: a step entered twice")

func (n casNext) Call(ctx stdctx.Context, p int) (int, error) {
	c := n.c
	k := n.gen + n.i
	if !c.state.CompareAndSwap(k, k+1) {
		return 0, errCASFloor
	}
	if n.i >= uint64(len(c.fns)) {
		return p, nil
	}
	fn := c.fns[n.i]
	n.i++
	return fn(ctx, p, n)
}

// BenchmarkHopFloor is what a hop is set against, in the same run as
// BenchmarkWaterfall:
//
//   - closure: n listeners of the waterfall's shape (ctx, payload, next),
//     each a closure calling the rest of the chain through a func value,
//     with no misuse check and no recover — a hop that is not race-free.
//   - cas: n listeners of that shape called through a slice, each hop
//     entering its step by one compare-and-swap on a word the chain
//     shares, the one atomic write a race-free hop cannot do without.
//   - cas+g: the cas floor, each hop first comparing the running goroutine
//     with the dispatch's. A hop must tell them apart to contain a panic
//     without deferring a recover of its own (~10 ns a hop here): on the
//     dispatch's goroutine the dispatch's one recover covers it, on any
//     other nothing does. It is the floor of a hop that keeps both
//     guarantees.
//   - cas+g/ctx=cancellable: cas+g checking a cancellable context before
//     each listener (ctx.Err), the floor of Waterfall's ctx=cancellable.
func BenchmarkHopFloor(b *testing.B) {
	listener := func(ctx stdctx.Context, p int, next floorNext) (int, error) { return next(ctx, p+1) }
	for _, n := range hopCounts {
		b.Run(fmt.Sprintf("closure/listeners=%d", n), func(b *testing.B) {
			chain := floorNext(func(_ stdctx.Context, p int) (int, error) { return p, nil })
			for range n {
				rest := chain
				chain = func(ctx stdctx.Context, p int) (int, error) { return listener(ctx, p, rest) }
			}
			ctx := stdctx.Background()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if r, _ := chain(ctx, 0); r != n {
					b.Fatalf("got %d", r)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/hop")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
	pass := func(ctx stdctx.Context, p int, next casNext) (int, error) { return next.Call(ctx, p+1) }
	for _, n := range hopCounts {
		b.Run(fmt.Sprintf("cas/listeners=%d", n), func(b *testing.B) {
			c := &casChain{}
			for range n {
				c.fns = append(c.fns, pass)
			}
			ctx := stdctx.Background()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				// Each dispatch starts where the last left the word, as a
				// new generation does.
				if r, err := (casNext{c: c, gen: c.state.Load()}).Call(ctx, 0); r != n || err != nil {
					b.Fatalf("got %d %v", r, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/hop")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
	opass := func(ctx stdctx.Context, p int, next ownedNext) (int, error) { return next.Call(ctx, p+1) }
	cpass := func(ctx stdctx.Context, p int, next ownedCtxNext) (int, error) { return next.Call(ctx, p+1) }
	cctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	for _, cancellable := range []bool{false, true} {
		for _, n := range hopCounts {
			name := fmt.Sprintf("cas+g/listeners=%d", n)
			if cancellable {
				name = fmt.Sprintf("cas+g/ctx=cancellable/listeners=%d", n)
			}
			b.Run(name, func(b *testing.B) {
				c := &ownedChain{}
				for range n {
					c.ofns = append(c.ofns, opass)
					c.cfns = append(c.cfns, cpass)
				}
				ctx := stdctx.Background()
				if cancellable {
					ctx = cctx
				}
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					// As a dispatch does: the owner is stored once, and
					// each dispatch starts a new generation.
					if g := waterfall.Curg(); c.owner.Load() != g {
						c.owner.Store(g)
					}
					var r int
					var err error
					if cancellable {
						r, err = (ownedCtxNext{c: c, gen: c.state.Load()}).Call(ctx, 0)
					} else {
						r, err = (ownedNext{c: c, gen: c.state.Load()}).Call(ctx, 0)
					}
					if r != n || err != nil {
						b.Fatalf("got %d %v", r, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/hop")
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkScopedDispatch dispatches for one agent while agents other scopes
// hold a listener each; the cost must not grow with agents.
func BenchmarkScopedDispatch(b *testing.B) {
	for _, agents := range []int{0, 1, 1000, 10000} {
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) {
			root := quietRoot(b)
			w := waterfall.New[int, int]("bench/scoped", nil)
			if _, err := w.On(root, passOn); err != nil {
				b.Fatal(err)
			}
			at := root
			for i := range agents {
				s, err := root.Scoped(fmt.Sprintf("agent-%d", i))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := w.On(s, passOn); err != nil {
					b.Fatal(err)
				}
				at = s
			}
			ctx := stdctx.Background()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				w.Dispatch(ctx, at, 0)
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkKeep measures what Keep costs a dispatch through 4 listeners
// that each pass a payload the size of an admission's on: keep=false is
// the floor, measured in the same run.
func BenchmarkKeep(b *testing.B) {
	type payload struct {
		From, To, ID, RequestID, Content string
		Tags                             []string
		Extra                            [8]int64
	}
	pass := func(ctx stdctx.Context, p payload, next waterfall.Next[payload, int]) (int, error) {
		p.From = "forged"
		return next.Call(ctx, p)
	}
	for _, keep := range []bool{false, true} {
		b.Run(fmt.Sprintf("keep=%v", keep), func(b *testing.B) {
			root := quietRoot(b)
			w := waterfall.New("bench/keep", func(_ stdctx.Context, p payload) (int, error) { return len(p.From), nil })
			if keep {
				w.Keep(func(orig, passed payload) payload { passed.From = orig.From; return passed })
			}
			for range 4 {
				if _, err := w.On(root, pass); err != nil {
					b.Fatal(err)
				}
			}
			ctx := stdctx.Background()
			p := payload{From: "token:alice", ID: "m1", Content: "hello"}
			want := len("forged")
			if keep {
				want = len(p.From)
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if r, _ := w.Dispatch(ctx, root, p); r != want {
					b.Fatalf("got %d", r)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the process's CPU time, user and system: on a shared machine
// it varies less than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
