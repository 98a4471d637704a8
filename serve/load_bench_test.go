package serve_test

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The load benchmarks report each figure beside a floor measured in the
// same run on the same machine state: the floor is what the same client
// code costs against a bare net/http server doing nothing dsh-specific.
// CPU time (cpu-ns, process user+system from getrusage) includes the
// client's share, as the floor's does.

// BenchmarkPromptAccept: POST /v1/sessions/{id}/messages → 202 over
// loopback, one at a time, round-robin over 4 sessions, against a bare
// POST of the same body to a handler that decodes it and answers 202
// (floor-ns/op). The accepted prompts run their turns meanwhile: cpu-ns/op
// is the CPU spent while posting; cpu-ns/answered also counts the turns
// that finished after the last 202.
func BenchmarkPromptAccept(b *testing.B) {
	floorWall, floorCPU := loadPostFloor(b, 2000)
	env := startLoadEnv(b)
	ids := make([]string, 4)
	for i := range ids {
		ids[i] = env.newSession(b)
	}
	ctx := stdctx.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), loadCPUTime()
	for i := range b.N {
		id := "bench-" + strconv.Itoa(i)
		if code, err := env.post(ctx, ids[i%len(ids)], id, "bench prompt "+id); err != nil || code != http.StatusAccepted {
			b.Fatalf("prompt %s: %d %v", id, code, err)
		}
	}
	wall, cpu := time.Since(start), loadCPUTime()-cpu0
	b.StopTimer()
	env.waitIdle(b, ids)
	all := loadCPUTime() - cpu0
	n := float64(b.N)
	b.ReportMetric(float64(cpu)/n, "cpu-ns/op")
	b.ReportMetric(float64(all)/n, "cpu-ns/answered")
	b.ReportMetric(float64(floorWall), "floor-ns/op")
	b.ReportMetric(float64(floorCPU), "floor-cpu-ns/op")
	b.ReportMetric(float64(wall)/n/float64(floorWall), "x-floor")
	b.ReportMetric(float64(cpu)/n/float64(floorCPU), "x-floor-cpu")
}

// loadPostFloor times n POSTs of a prompt's body to a bare handler that
// decodes it and answers 202, through the same client code; it returns
// wall and CPU time per POST.
func loadPostFloor(tb testing.TB, n int) (wall, cpu time.Duration) {
	tb.Helper()
	base, stop := startLoadHTTP(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			RequestID string `json:"request_id"`
			Content   string `json:"content"`
			Mode      string `json:"mode"`
		}
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"message_id":"m-%s","request_id":%q}`, p.RequestID, p.RequestID)
	}))
	defer stop()
	e := &loadEnv{base: base, token: "floor", api: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}}
	defer e.api.CloseIdleConnections()
	ctx := stdctx.Background()
	start, cpu0 := time.Now(), loadCPUTime()
	for i := range n {
		id := "bench-" + strconv.Itoa(i)
		if code, err := e.post(ctx, "s", id, "bench prompt "+id); err != nil || code != http.StatusAccepted {
			tb.Fatalf("floor POST: %d %v", code, err)
		}
	}
	return time.Since(start) / time.Duration(n), (loadCPUTime() - cpu0) / time.Duration(n)
}

// BenchmarkFanout: one prompt's SSE messages (the user/message, the
// streamed chunks, the assistant/message, the turn's other events) to
// every subscriber of its session, per message per subscriber
// (ns/msg-sub). Each op posts a prompt and waits until every subscriber
// holds its turn/end. The floor writes the same bytes — recorded from a
// real stream — to as many idle streams of a bare net/http server,
// flushing each message, read by the same client code. At 1 subscriber
// the prompt's own cost (POST, turn, model, log) dominates; the slope
// between the sizes is what one more subscriber costs.
func BenchmarkFanout(b *testing.B) {
	for _, k := range []int{1, 10, 100} {
		b.Run("subscribers="+strconv.Itoa(k), func(b *testing.B) { benchFanout(b, k) })
	}
}

func benchFanout(b *testing.B, k int) {
	env := startLoadEnv(b)
	id := env.newSession(b)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	var msgs, ends atomic.Int64
	turnEnded := make(chan struct{}, 1)
	var capturing atomic.Bool
	var capMu sync.Mutex
	var frames [][]byte
	subs := make([]*loadSubscriber, k)
	for i := range subs {
		s := newLoadSubscriber(env.base, env.token, id, env.streams, 0, func(string) (time.Time, bool) { return time.Time{}, false })
		first := i == 0
		s.tap = func(m loadSSEMessage) {
			msgs.Add(1)
			if first && capturing.Load() {
				capMu.Lock()
				frames = append(frames, m.frame())
				capMu.Unlock()
			}
			if m.Event == "event" && bytes.Contains(m.Data, []byte(`"type":"turn/end"`)) {
				if ends.Add(1)%int64(k) == 0 {
					select {
					case turnEnded <- struct{}{}:
					default:
					}
				}
			}
		}
		subs[i] = s
		wg.Go(func() { s.run(ctx) })
	}
	for _, s := range subs {
		<-s.ready
	}
	prompt := func(i int) {
		rid := "fan-" + strconv.Itoa(i)
		if code, err := env.post(ctx, id, rid, "fan out prompt "+rid); err != nil || code != http.StatusAccepted {
			b.Fatalf("prompt %s: %d %v", rid, code, err)
		}
		for ends.Load() < int64(k*(i+1)) {
			select {
			case <-turnEnded:
			case <-time.After(30 * time.Second):
				b.Fatalf("prompt %s: %d of %d subscribers saw its turn end within 30s", rid, ends.Load()-int64(k*i), k)
			}
		}
	}
	// The first prompt records what the floor sends.
	capturing.Store(true)
	prompt(0)
	capturing.Store(false)
	capMu.Lock()
	recorded := frames
	capMu.Unlock()
	floorWall, floorCPU := loadFanoutFloor(b, k, recorded, max(20, 2000/k))

	msgs0 := msgs.Load()
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), loadCPUTime()
	for i := range b.N {
		prompt(i + 1)
	}
	wall, cpu := time.Since(start), loadCPUTime()-cpu0
	b.StopTimer()
	for _, s := range subs {
		s.mu.Lock()
		if s.gaps+s.doubles > 0 || len(s.problems) > 0 {
			b.Errorf("a subscriber saw %d gaps, %d doubles: %q", s.gaps, s.doubles, s.problems)
		}
		s.mu.Unlock()
	}
	delivered := float64(msgs.Load() - msgs0)
	b.ReportMetric(delivered/float64(b.N)/float64(k), "msgs/op/sub")
	b.ReportMetric(float64(wall)/delivered, "ns/msg-sub")
	b.ReportMetric(float64(cpu)/delivered, "cpu-ns/msg-sub")
	b.ReportMetric(float64(floorWall), "floor-ns/msg-sub")
	b.ReportMetric(float64(floorCPU), "floor-cpu-ns/msg-sub")
	b.ReportMetric(float64(wall)/delivered/float64(floorWall), "x-floor")
	b.ReportMetric(float64(cpu)/delivered/float64(floorCPU), "x-floor-cpu")
}

// loadFanoutFloor sends frames to k bare streams rounds times, waiting
// for every client to read each round; it returns wall and CPU time per
// message per subscriber.
func loadFanoutFloor(tb testing.TB, k int, frames [][]byte, rounds int) (wall, cpu float64) {
	tb.Helper()
	if len(frames) == 0 {
		tb.Fatal("no frames recorded for the floor")
	}
	f := startLoadFloorSSE(tb, frames)
	defer f.stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}
	defer client.CloseIdleConnections()
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var got atomic.Int64
	round := make(chan struct{}, 1)
	per := int64(k * len(frames))
	subs := make([]*loadSubscriber, k)
	for i := range subs {
		s := newLoadSubscriber(f.base, "", "floor", client, 0, func(string) (time.Time, bool) { return time.Time{}, false })
		s.unchecked = true
		s.tap = func(loadSSEMessage) {
			if got.Add(1)%per == 0 {
				select {
				case round <- struct{}{}:
				default:
				}
			}
		}
		subs[i] = s
		wg.Go(func() { s.run(ctx) })
	}
	for _, s := range subs {
		<-s.ready
	}
	start, cpu0 := time.Now(), loadCPUTime()
	for r := range rounds {
		f.trigger()
		for got.Load() < per*int64(r+1) {
			select {
			case <-round:
			case <-time.After(30 * time.Second):
				tb.Fatalf("floor round %d: %d of %d messages", r, got.Load()-per*int64(r), per)
			}
		}
	}
	n := float64(per) * float64(rounds)
	return float64(time.Since(start)) / n, float64(loadCPUTime()-cpu0) / n
}

// BenchmarkSubscriberMemory: attaching one SSE subscriber to a session
// with 10 answered prompts, until it holds the session's last seq (ns/op,
// allocs/op), and what each attached subscriber keeps: heap after GC,
// goroutine stacks and goroutines, client side included, beside the same for a bare SSE stream
// of a net/http server (floor-B/sub, floor-goroutines/sub). Subscribers
// attach in batches of 100, which are measured and then let go.
func BenchmarkSubscriberMemory(b *testing.B) {
	floor := loadFloorMemory(b, 100)
	env := startLoadEnv(b)
	id := env.newSession(b)
	ctx := stdctx.Background()
	for i := range 10 {
		rid := "mem-" + strconv.Itoa(i)
		if code, err := env.post(ctx, id, rid, "memory prompt "+rid); err != nil || code != http.StatusAccepted {
			b.Fatalf("prompt %s: %d %v", rid, code, err)
		}
	}
	env.waitIdle(b, []string{id})
	var s struct {
		LastSeq int64 `json:"last_seq"`
	}
	if _, err := env.call(ctx, http.MethodGet, "/v1/sessions/"+id, nil, &s); err != nil {
		b.Fatal(err)
	}
	baseline := runtime.NumGoroutine()
	var heap, stack, goroutines float64
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(100, b.N-done)
		b.StopTimer()
		loadWaitGoroutines(b, baseline)
		before := loadMeasure()
		bctx, cancel := stdctx.WithCancel(ctx)
		var wg sync.WaitGroup
		b.StartTimer()
		for range n {
			sub := newLoadSubscriber(env.base, env.token, id, env.streams, 0, func(string) (time.Time, bool) { return time.Time{}, false })
			up := make(chan struct{})
			var once sync.Once
			sub.tap = func(loadSSEMessage) {
				if sub.caughtUp(s.LastSeq) {
					once.Do(func() { close(up) })
				}
			}
			wg.Go(func() { sub.run(bctx) })
			select {
			case <-up:
			case <-time.After(30 * time.Second):
				b.Fatalf("a subscriber did not reach seq %d within 30s: %q", s.LastSeq, sub.problems)
			}
		}
		b.StopTimer()
		after := loadMeasure()
		m := after.per(before, 1)
		heap += m.heapPer
		stack += m.stackPer
		goroutines += m.goPer
		cancel()
		wg.Wait()
		done += n
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(heap/float64(b.N), "B/sub")
	b.ReportMetric(goroutines/float64(b.N), "goroutines/sub")
	b.ReportMetric(stack/float64(b.N), "stack-B/sub")
	b.ReportMetric(floor.heapPer, "floor-B/sub")
	b.ReportMetric(floor.stackPer, "floor-stack-B/sub")
	b.ReportMetric(floor.goPer, "floor-goroutines/sub")
}

// loadWaitGoroutines waits for the goroutines of subscribers let go (the
// server's side ends after the client's) to be gone.
func loadWaitGoroutines(tb testing.TB, baseline int) {
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			tb.Fatalf("%d goroutines, %d before the subscribers attached", runtime.NumGoroutine(), baseline)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitIdle waits until no session of ids runs a turn.
func (e *loadEnv) waitIdle(tb testing.TB, ids []string) {
	tb.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for _, id := range ids {
		for {
			var s struct {
				Running bool `json:"running"`
			}
			if _, err := e.call(stdctx.Background(), http.MethodGet, "/v1/sessions/"+id, nil, &s); err != nil {
				tb.Fatal(err)
			}
			if !s.Running {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("session %s still runs a turn after 2 minutes", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
