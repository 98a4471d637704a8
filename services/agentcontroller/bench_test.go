package agentcontroller_test

import (
	stdctx "context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// counter is an agent whose inbox only counts, so the benchmark measures
// delivery and nothing else.
type counter struct {
	id    string
	scope *dshctx.Context
	n     atomic.Int64
}

func (c *counter) ID() string                    { return c.id }
func (c *counter) Status() agents.Status         { return agents.StatusIdle }
func (c *counter) Session() *session.Session     { return nil }
func (c *counter) Context() *dshctx.Context      { return c.scope }
func (c *counter) Abort()                        {}
func (c *counter) Cancel(error)                  {}
func (c *counter) WhenIdle(stdctx.Context) error { return nil }
func (c *counter) Followup(llm.Message) error    { c.n.Add(1); return nil }
func (c *counter) Steer(llm.Message) error       { c.n.Add(1); return nil }
func (c *counter) Pending() int                  { return 0 }

// BenchmarkDeliver sends 1,000 deliveries to each of 1,000 agents through
// two admission listeners that admit. One sender goroutine per core takes a
// share of the agents and delivers to them in turn, so the latencies measure
// the delivery rather than 1,000 goroutines queuing for two cores. It
// reports deliveries per second and the latency percentiles.
func BenchmarkDeliver(b *testing.B) {
	const agentsN, perAgent = 1000, 1000
	e := testkit.New(b)
	var seen atomic.Int64
	for range 2 {
		agentcontroller.EventAdmission.On(e.Root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			if a.Message.Content == "" {
				seen.Add(1)
			}
			return next.Call(ctx, a)
		})
	}
	targets := make([]*counter, agentsN)
	for i := range targets {
		scope, _ := e.Root.Scoped(fmt.Sprintf("agent-%d", i))
		targets[i] = &counter{id: scope.Tag(), scope: scope}
		e.Registry.Reserve(targets[i].id)
		e.Registry.Publish(targets[i])
	}
	lat := make([][]time.Duration, agentsN)
	for i := range lat {
		lat[i] = make([]time.Duration, perAgent)
	}
	b.ReportAllocs()
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		var wg sync.WaitGroup
		senders := runtime.GOMAXPROCS(0)
		for w := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := testkit.Send("hello")
				for j := range perAgent {
					for i := w; i < agentsN; i += senders {
						t0 := time.Now()
						if _, err := e.Controller.Deliver(stdctx.Background(), targets[i], req); err != nil {
							b.Error(err)
							return
						}
						lat[i][j] = time.Since(t0)
					}
				}
			}()
		}
		wg.Wait()
		total += time.Since(start)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	n := float64(b.N * agentsN * perAgent)
	b.ReportMetric(n/total.Seconds(), "deliveries/s")
	b.ReportMetric(float64(all[len(all)/2].Nanoseconds())/1000, "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds())/1000, "p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkDeliverSerial is one sender delivering to one agent: the latency
// of an un-held delivery without contention. With a sender that can cancel,
// the delivery runs on a goroutine of its own so the sender can leave
// while a listener still decides.
func BenchmarkDeliverSerial(b *testing.B) {
	for _, sender := range []string{"background", "cancellable"} {
		b.Run("sender="+sender, func(b *testing.B) {
			e := testkit.New(b)
			for range 2 {
				agentcontroller.EventAdmission.On(e.Root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
					return next.Call(ctx, a)
				})
			}
			scope, _ := e.Root.Scoped("a")
			a := &counter{id: "a", scope: scope}
			e.Registry.Reserve("a")
			e.Registry.Publish(a)
			req := testkit.Send("hello")
			ctx := stdctx.Background()
			if sender == "cancellable" {
				var cancel stdctx.CancelFunc
				ctx, cancel = stdctx.WithCancel(ctx)
				defer cancel()
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Controller.Deliver(ctx, a, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestIdleAgentsCostTheControllerNothing checks that an agent with nothing
// in flight leaves no goroutine and no entry behind.
func TestIdleAgentsCostTheControllerNothing(t *testing.T) {
	e := testkit.New(t)
	before := runtime.NumGoroutine()
	for i := range 100 {
		a := e.Agent(fmt.Sprintf("a%d", i))
		if _, err := e.Controller.Deliver(stdctx.Background(), a, testkit.Send("x")); err != nil {
			t.Fatal(err)
		}
	}
	if n := agentcontroller.InFlightChains(e.Controller); n != 0 {
		t.Fatalf("%d chains kept for idle agents", n)
	}
	if runtime.NumGoroutine() > before {
		t.Fatalf("goroutines grew from %d to %d", before, runtime.NumGoroutine())
	}
}
