package agentloop_test

import (
	stdctx "context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/waterfall"
)

// runTurn sends one message and waits for its turn to end.
func runTurn(tb testing.TB, a agents.Agent) {
	if err := a.Followup(user("hello there")); err != nil {
		tb.Fatal(err)
	}
	if err := a.WhenIdle(stdctx.Background()); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkTurn is one turn of one step with the zero-latency scripted
// model and no tools, session appends included.
func BenchmarkTurn(b *testing.B) {
	e := newEnv(b, []scripted.Reply{{Text: "Sure, here is a short answer."}}, agentloop.Config{})
	a := e.create("a").Agent
	b.ReportAllocs()
	for b.Loop() {
		runTurn(b, a)
	}
}

// BenchmarkStep measures one step: a turn of 100 steps (a continuation
// listener asks for more), reported per step, so the wake-up of the driver
// goroutine is spread thin.
func BenchmarkStep(b *testing.B) {
	const steps = 100
	e := newEnv(b, []scripted.Reply{{Text: "Sure, here is a short answer."}}, agentloop.Config{MaxSteps: steps})
	agentloop.EventContinuation.On(e.root, func(_ stdctx.Context, c agentloop.Continuation, _ waterfall.Next[agentloop.Continuation, bool]) (bool, error) {
		return c.Step < steps, nil
	})
	a := e.create("a").Agent
	b.ReportAllocs()
	for b.Loop() {
		runTurn(b, a)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkTurnAtDepth measures a turn after n earlier turns on the same
// agent; the cost must not grow with the history.
func BenchmarkTurnAtDepth(b *testing.B) {
	for _, depth := range []int{10, 2000} {
		b.Run(fmt.Sprintf("turn=%d", depth), func(b *testing.B) {
			e := newEnv(b, []scripted.Reply{{Text: "Sure, here is a short answer."}}, agentloop.Config{})
			a := e.create("a").Agent
			for range depth {
				runTurn(b, a)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				runTurn(b, a)
			}
		})
	}
}

// BenchmarkIdleAgents reports the heap held by each of 10,000 idle agents.
func BenchmarkIdleAgents(b *testing.B) {
	const n = 10_000
	for b.Loop() {
		e := newEnv(b, nil, agentloop.Config{})
		before := heapInUse()
		goroutines := runtime.NumGoroutine()
		handles := make([]*agents.Handle, n)
		for i := range n {
			h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: fmt.Sprintf("agent-%05d", i), Options: agents.Options{Provider: "scripted"}})
			if err != nil {
				b.Fatal(err)
			}
			handles[i] = h
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/n, "B/agent")
		b.ReportMetric(float64(runtime.NumGoroutine()-goroutines), "goroutines")
		for _, h := range handles {
			h.Dispose(stdctx.Background())
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestManyAgentsWithCancelsAndDisposes runs turns on many agents at once
// while cancelling and disposing some at random; it must finish without a
// deadlock or a race, and every surviving agent must go idle.
func TestManyAgentsWithCancelsAndDisposes(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	e := newEnv(t, []scripted.Reply{{Text: "one two three four five"}}, agentloop.Config{})
	handles := make([]*agents.Handle, n)
	for i := range handles {
		h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: fmt.Sprintf("a%d", i), Options: agents.Options{Provider: "scripted"}})
		if err != nil {
			t.Fatal(err)
		}
		handles[i] = h
	}
	var wg sync.WaitGroup
	for i, h := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for range 3 {
				h.Agent.Followup(user("go"))
			}
			switch r.IntN(4) {
			case 0:
				h.Agent.Cancel(nil)
			case 1:
				h.Dispose(stdctx.Background())
			case 2:
				h.Agent.Abort()
			}
		}()
	}
	wg.Wait()
	for _, h := range handles {
		idle(t, h.Agent)
		for _, ev := range h.Agent.Session().Events(1) {
			_ = ev
		}
		h.Dispose(stdctx.Background())
	}
	if left := len(e.registry.List()); left != 0 {
		t.Fatalf("%d agents left", left)
	}
}

// BenchmarkFirstTurn measures a fresh agent's first turn — its creation
// included — against a steady turn of the same agent, in the same
// iteration, so the ratio holds on a noisy machine. The standing target is
// first ≤ 1.5× steady.
func BenchmarkFirstTurn(b *testing.B) {
	e := newEnv(b, []scripted.Reply{{Text: "Sure, here is a short answer."}}, agentloop.Config{})
	// One agent warms the process up: code paths, pools, the scheduler.
	warm := e.create("warm").Agent
	runTurn(b, warm)
	var first, created, steady time.Duration
	var firstCPU, createdCPU, steadyCPU time.Duration
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		start, startCPU := time.Now(), testkit.CPUTime()
		h := e.create(fmt.Sprintf("a%d", n))
		made, madeCPU := time.Now(), testkit.CPUTime()
		runTurn(b, h.Agent)
		mid, midCPU := time.Now(), testkit.CPUTime()
		runTurn(b, h.Agent)
		end, endCPU := time.Now(), testkit.CPUTime()
		first += mid.Sub(start)
		created += made.Sub(start)
		steady += end.Sub(mid)
		firstCPU += midCPU - startCPU
		createdCPU += madeCPU - startCPU
		steadyCPU += endCPU - midCPU
		// Disposed outside both windows, with the benchmark's timer left
		// running: StopTimer reads the memory statistics, which stops the
		// world, and the first turn after it would pay for waking the
		// scheduler up again.
		if err := h.Dispose(stdctx.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(first.Nanoseconds())/float64(n), "first-ns/op")
	b.ReportMetric(float64(steady.Nanoseconds())/float64(n), "steady-ns/op")
	b.ReportMetric(float64(first)/float64(steady), "first/steady")
	// CPU time, the process's: the machine's other load moves it less.
	b.ReportMetric(float64(firstCPU.Nanoseconds())/float64(n), "first-cpu-ns/op")
	b.ReportMetric(float64(steadyCPU.Nanoseconds())/float64(n), "steady-cpu-ns/op")
	b.ReportMetric(float64(firstCPU)/float64(steadyCPU), "first/steady-cpu")
	b.ReportMetric(float64(firstCPU-createdCPU)/float64(steadyCPU), "turn1/steady-cpu")
	// The first turn alone, the agent already created.
	b.ReportMetric(float64(first-created)/float64(steady), "turn1/steady")
}
