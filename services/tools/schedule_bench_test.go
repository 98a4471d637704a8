package tools_test

import (
	stdctx "context"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/tools"
)

// benchTools registers a zero-cost tool of each kind and one of each that
// sleeps d.
func benchTools(b *testing.B, d time.Duration) func([]tools.Call) error {
	s, root := newService(b)
	free := func(stdctx.Context, tools.Call) (tools.Result, error) { return tools.Result{Content: "ok"}, nil }
	slow := func(stdctx.Context, tools.Call) (tools.Result, error) {
		time.Sleep(d)
		return tools.Result{Content: "ok"}, nil
	}
	register(b, s, root, "p", true, free)
	register(b, s, root, "x", false, free)
	register(b, s, root, "slow-p", true, slow)
	register(b, s, root, "slow-x", false, slow)
	run := func(calls []tools.Call) error {
		return s.Run(stdctx.Background(), root, calls, tools.Schedule{
			Start: func(int) bool { return true },
			Done:  func(int, tools.Outcome) {},
		})
	}
	return run
}

func repeat(name string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = name
	}
	return out
}

// BenchmarkRunOverhead is the scheduler's cost per call with tools that
// cost nothing: a step of 8 calls per op, reported per call, beside the
// same 8 calls executed one by one without the scheduler.
func BenchmarkRunOverhead(b *testing.B) {
	const n = 8
	for _, kind := range []struct{ name, tool string }{{"parallel-safe", "p"}, {"exclusive", "x"}} {
		b.Run(kind.name, func(b *testing.B) {
			run := benchTools(b, 0)
			calls := callsOf(repeat(kind.tool, n)...)
			b.ReportAllocs()
			for b.Loop() {
				if err := run(calls); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/call")
		})
	}
	b.Run("baseline-execute", func(b *testing.B) {
		s, root := newService(b)
		register(b, s, root, "p", true, func(stdctx.Context, tools.Call) (tools.Result, error) { return tools.Result{Content: "ok"}, nil })
		calls := callsOf(repeat("p", n)...)
		b.ReportAllocs()
		for b.Loop() {
			for _, c := range calls {
				if _, err := s.Execute(stdctx.Background(), root, c); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/call")
	})
}

// BenchmarkRunEightParallel50ms: eight parallel-safe calls of 50 ms each
// run as one group: an op takes about 50 ms, not 400.
func BenchmarkRunEightParallel50ms(b *testing.B) {
	run := benchTools(b, 50*time.Millisecond)
	calls := callsOf(repeat("slow-p", 8)...)
	b.ReportAllocs()
	for b.Loop() {
		if err := run(calls); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
}

// BenchmarkRunExclusiveInTheMiddle50ms: four parallel-safe calls, an
// exclusive one, four more, each 50 ms: two groups and the exclusive call
// between them, about 150 ms an op.
func BenchmarkRunExclusiveInTheMiddle50ms(b *testing.B) {
	run := benchTools(b, 50*time.Millisecond)
	calls := callsOf(append(append(repeat("slow-p", 4), "slow-x"), repeat("slow-p", 4)...)...)
	b.ReportAllocs()
	for b.Loop() {
		if err := run(calls); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
}
