package waterfall_test

import (
	stdctx "context"
	"fmt"
	"github.com/dsh-go/dsh/internal/ctxtest"
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

// BenchmarkWaterfall measures a dispatch through n listeners that each call
// next; ns/op divided by n is the cost of one hop.
func BenchmarkWaterfall(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("listeners=%d", n), func(b *testing.B) {
			root := quietRoot(b)
			w := waterfall.New[int, int]("bench/chain", func(_ stdctx.Context, p int) (int, error) { return p, nil })
			for range n {
				if _, err := w.On(root, passOn); err != nil {
					b.Fatal(err)
				}
			}
			ctx := stdctx.Background()
			b.ReportAllocs()
			for b.Loop() {
				if r, _ := w.Dispatch(ctx, root, 0); r != n {
					b.Fatalf("got %d", r)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/hop")
		})
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
			for b.Loop() {
				w.Dispatch(ctx, at, 0)
			}
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
