package cluster_test

import (
	stdctx "context"
	"encoding/json"
	"flag"
	"strconv"
	"strings"
	"testing"
	"time"

	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The prompt benchmarks report each figure beside a floor measured in the
// same run on the same server: one bare NATS request/reply between two
// connections, with a payload the size of a forwarded prompt. CPU time
// (cpu-ns, the process's user+system time from getrusage) counts every
// party in the process: the sender, the owner, the NATS server and the
// prompt's turn; allocs/op counts them too.

// benchSessions is how many sessions of the owner the prompts go round.
const benchSessions = 4

// benchFloorOps is how many round trips the in-run floor times.
const benchFloorOps = 2000

// benchCluster is three hosts with benchSessions sessions open on the
// first one, a.
type benchCluster struct {
	*loadCluster
	ids []string
}

func startBenchCluster(b *testing.B) *benchCluster {
	b.Helper()
	return startBenchClusterWith(b, 0)
}

func startBenchClusterWith(b *testing.B, delay time.Duration) *benchCluster {
	b.Helper()
	lc := startLoadClusterWith(b, loadLeaseTTL, delay)
	bc := &benchCluster{loadCluster: lc}
	for i := range benchSessions {
		id := "bench-" + strconv.Itoa(i)
		if _, err := lc.nodes[0].h.Sessions().Open(stdctx.Background(), sessions.OpenOptions{Agent: "main", SessionID: id, KeepRunning: true}); err != nil {
			b.Fatal(err)
		}
		lc.owner[id] = 0
		bc.ids = append(bc.ids, id)
	}
	return bc
}

// prompt sends the prompt numbered i, with a request id unique in the run,
// through host via.
func (bc *benchCluster) prompt(b *testing.B, via int, tag string, i int) {
	rid := tag + "-" + strconv.Itoa(i)
	if _, err := bc.nodes[via].c.Prompt(stdctx.Background(), bc.ids[i%len(bc.ids)], agentcontroller.Followup,
		sessions.PromptRequest{RequestID: rid, Content: "bench prompt " + rid}); err != nil {
		b.Fatalf("prompt %s through host %s: %v", rid, bc.nodes[via].id, err)
	}
}

// idle waits until the owner has answered every prompt.
func (bc *benchCluster) idle(b *testing.B) {
	b.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 2*time.Minute)
	defer cancel()
	for _, id := range bc.ids {
		if err := bc.nodes[0].h.Sessions().Idle(ctx, id); err != nil {
			b.Fatalf("session %s on host a did not finish its turns within 2 minutes (or is no longer open there): %v", id, err)
		}
	}
}

// BenchmarkPromptLocal: (*cluster.Host).Prompt on the session's owner,
// round-robin over 4 idle sessions — the lookup in the local controller,
// admission, the inbox, waking the agent — and the prompt's turn.
func BenchmarkPromptLocal(b *testing.B) {
	bc := startBenchCluster(b)
	floorWall, floorCPU := natsFloor(b, bc.srv, benchFloorOps)
	benchPrompts(b, bc, 0, floorWall, floorCPU)
}

// BenchmarkPromptForwarded: Prompt on host b for sessions owned by host a
// — the owner from b's view of the leases, the request over NATS, the
// owner's Prompt and its reply — and the prompt's turn on a. local-accept-ns/op and accept-x-local are the accepts of as many
// local prompts timed in the same run;
// lease-get-ns/op is one read of a session's lease on its own, from the
// bucket's leader, which a forward made before it went by the lease watch
// and still makes when the view has no entry; lease-direct-get-ns/op the same by direct get, which a replica may
// answer stale.
func BenchmarkPromptForwarded(b *testing.B) {
	bc := startBenchCluster(b)
	floorWall, floorCPU := natsFloor(b, bc.srv, benchFloorOps)
	n := max(100, min(b.N, benchFloorOps))
	var local time.Duration
	for i := 0; i < n; {
		start := time.Now()
		for end := backlogEnd(i, n); i < end; i++ {
			bc.prompt(b, 0, "local", i)
		}
		local += time.Since(start)
		bc.idle(b)
	}
	localWall := local / time.Duration(n)
	leaseWall, leaseCPU, directWall := leaseGet(b, bc, n)
	accept := benchPrompts(b, bc, 1, floorWall, floorCPU)
	b.ReportMetric(float64(localWall), "local-accept-ns/op")
	b.ReportMetric(float64(accept)/float64(localWall), "accept-x-local")
	b.ReportMetric(float64(leaseWall), "lease-get-ns/op")
	b.ReportMetric(float64(leaseCPU), "lease-get-cpu-ns/op")
	b.ReportMetric(float64(directWall), "lease-direct-get-ns/op")
}

// benchBacklog is how many prompts a benchmark sends before it waits for
// the owner to answer them. With 1, the default, every prompt is accepted
// by an idle owner and answered in a turn of its own, local and forwarded
// alike, so the two compare. A larger
// backlog has local prompts, accepted in microseconds, share turns, and
// forwarded ones, which take longer than a turn, not; an unbounded one
// (0) makes turns of tens of thousands of messages, whose log session.nats
// then fails to store (see /work/notes/load18.md).
var benchBacklog = flag.Int("bench.backlog", 1, "prompt benchmarks: prompts sent before waiting for their answers (0: never wait)")

// backlogEnd is where a batch of prompts that starts at i ends.
func backlogEnd(i, n int) int {
	if *benchBacklog <= 0 {
		return n
	}
	return min(n, i+*benchBacklog)
}

// benchPrompts times b.N prompts through host via, each op a prompt and
// its answer: -bench.backlog prompts, then the wait until the owner
// answered them. ns/op, cpu-ns/op, B/op and allocs/op cover both, so local
// and forwarded ops differ by the forwarding alone; accept-ns/op is the
// Prompt call by itself. It returns accept-ns/op.
func benchPrompts(b *testing.B, bc *benchCluster, via int, floorWall, floorCPU time.Duration) time.Duration {
	b.ReportAllocs()
	b.ResetTimer()
	var accept time.Duration
	cpu0 := cpuTime()
	for i := 0; i < b.N; {
		s := time.Now()
		for end := backlogEnd(i, b.N); i < end; i++ {
			bc.prompt(b, via, "bench", i)
		}
		accept += time.Since(s)
		bc.idle(b)
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if errs := bc.agentErrors(); len(errs) > 0 {
		b.Fatalf("the hosts reported agent errors:\n%s", strings.Join(errs, "\n"))
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64(accept/n), "accept-ns/op")
	b.ReportMetric(float64(cpu/n), "cpu-ns/op")
	b.ReportMetric(float64(floorWall), "floor-ns/op")
	b.ReportMetric(float64(floorCPU), "floor-cpu-ns/op")
	b.ReportMetric(float64(accept/n)/float64(floorWall), "accept-x-floor")
	return accept / n
}

// benchQueue bounds the prompts BenchmarkPromptQueued leaves queued.
const benchQueue = 4096

// BenchmarkPromptQueued: Prompt while the owner's session runs a turn
// that does not end (the model waits an hour before its first chunk), so
// each prompt is only queued and starts no turn — on 2 cores a new turn
// competes with the forwarded reply — on the owner (local) and on another
// host (forwarded). The turn is cancelled every benchQueue prompts,
// untimed, dropping the queue, and held again.
//
// A forwarded prompt is a local one plus a request/reply between hosts,
// so its floor is that sum: forwarded runs, untimed and interleaved with
// its own chunks of benchQueuedChunk prompts (so both see the same load),
// as many local queued prompts on the owner and bare NATS round trips
// (local-queued-ns/op, local-queued-cpu-ns/op, floor-ns/op,
// floor-cpu-ns/op); x-local-floor and cpu-x-local-floor are the forwarded
// prompt over local-queued + floor. x-floor and x-floor-cpu stay the ratio
// to the bare round trip alone.
func BenchmarkPromptQueued(b *testing.B) {
	for _, c := range []struct {
		name string
		via  int
	}{{"local", 0}, {"forwarded", 1}} {
		b.Run(c.name, func(b *testing.B) {
			bc := startBenchClusterWith(b, time.Hour)
			ss, ok := bc.nodes[0].h.Sessions().Get(bc.ids[0])
			if !ok {
				b.Fatal("the session is not open on host a")
			}
			running := func() bool {
				in, err := bc.nodes[0].h.Sessions().Info(stdctx.Background(), bc.ids[0])
				if err != nil {
					b.Fatal(err)
				}
				return in.Running
			}
			holds := 0
			hold := func() {
				holds++
				if _, err := ss.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "hold-" + strconv.Itoa(holds), Content: "hold the turn"}); err != nil {
					b.Fatal(err)
				}
				deadline := time.Now().Add(time.Minute)
				for !running() {
					if time.Now().After(deadline) {
						b.Fatal("the holding turn did not start within a minute")
					}
					time.Sleep(time.Millisecond)
				}
			}
			// At most benchQueue wait in the inbox: the queue of a default
			// -benchtime run would otherwise take gigabytes. Cancel drops
			// the queue and ends the turn; the caller stops the timer.
			queued := 0
			drain := func() {
				if err := ss.Cancel(stdctx.Background()); err != nil {
					b.Fatal(err)
				}
				queued = 0
				hold()
			}
			queue := func(via int, tag string, n int) (wall, cpu time.Duration) {
				start, c0 := time.Now(), cpuTime()
				for i := range n {
					rid := tag + "-" + strconv.Itoa(i)
					if _, err := bc.nodes[via].c.Prompt(stdctx.Background(), bc.ids[0], agentcontroller.Followup,
						sessions.PromptRequest{RequestID: rid, Content: "queued " + rid}); err != nil {
						b.Fatalf("prompt %s: %v", rid, err)
					}
				}
				queued += n
				return time.Since(start), cpuTime() - c0
			}
			hold()
			f := startFloor(b, bc.srv)
			defer f.close()
			f.roundTrip(b) // the requester's response subscription
			floorOf := func(n int) (wall, cpu time.Duration) {
				start, c0 := time.Now(), cpuTime()
				for range n {
					f.roundTrip(b)
				}
				return time.Since(start), cpuTime() - c0
			}
			interleave := c.via != 0
			var floorWall, floorCPU, localWall, localCPU time.Duration
			var floorN int
			if !interleave {
				floorWall, floorCPU = floorOf(benchFloorOps)
				floorN = benchFloorOps
			}
			b.ReportAllocs()
			b.ResetTimer()
			var wall, cpu time.Duration
			for i := 0; i < b.N; {
				n := min(b.N-i, benchQueuedChunk)
				if interleave {
					b.StopTimer()
					if queued+n > benchQueue {
						drain()
					}
					w, c := queue(0, "local-"+strconv.Itoa(i), n)
					localWall, localCPU = localWall+w, localCPU+c
					w, c = floorOf(n)
					floorWall, floorCPU, floorN = floorWall+w, floorCPU+c, floorN+n
					b.StartTimer()
				}
				if queued+n > benchQueue {
					b.StopTimer()
					drain()
					b.StartTimer()
				}
				w, c := queue(c.via, "queued-"+strconv.Itoa(i), n)
				wall, cpu = wall+w, cpu+c
				i += n
			}
			b.StopTimer()
			per := func(d time.Duration, n int) float64 { return float64(d) / float64(n) }
			b.ReportMetric(per(wall, b.N), "wall-ns/op")
			b.ReportMetric(per(cpu, b.N), "cpu-ns/op")
			b.ReportMetric(per(floorWall, floorN), "floor-ns/op")
			b.ReportMetric(per(floorCPU, floorN), "floor-cpu-ns/op")
			b.ReportMetric(per(wall, b.N)/per(floorWall, floorN), "x-floor")
			b.ReportMetric(per(cpu, b.N)/per(floorCPU, floorN), "x-floor-cpu")
			if interleave {
				b.ReportMetric(per(localWall, floorN), "local-queued-ns/op")
				b.ReportMetric(per(localCPU, floorN), "local-queued-cpu-ns/op")
				b.ReportMetric(per(wall, b.N)/(per(localWall, floorN)+per(floorWall, floorN)), "x-local-floor")
				b.ReportMetric(per(cpu, b.N)/(per(localCPU, floorN)+per(floorCPU, floorN)), "cpu-x-local-floor")
			}
		})
	}
}

// benchQueuedChunk is how many forwarded prompts BenchmarkPromptQueued
// times between two chunks of its floor.
const benchQueuedChunk = 100

// BenchmarkNATSRequestFloor: the floor on its own — a bare NATS
// request/reply round trip between two connections to one embedded server,
// the request the size of a forwarded prompt, the reply that of its
// answer.
func BenchmarkNATSRequestFloor(b *testing.B) {
	srv := startLoadServer(b)
	f := startFloor(b, srv)
	defer f.close()
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range b.N {
		f.roundTrip(b)
	}
	wall, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(wall)/float64(b.N), "wall-ns/op")
}

// floorSubject is what the floor's responder answers on.
const floorSubject = "floor.host.a"

// floor is a responder and a requester, each on its own connection, as two
// hosts are.
type floor struct {
	requester, responder *nats.Conn
	sub                  *nats.Subscription
	payload              []byte
}

// floorRequest has the fields of a forwarded prompt, so its JSON is the
// same size.
type floorRequest struct {
	Op        string                 `json:"op"`
	Session   string                 `json:"session"`
	Mode      agentcontroller.Mode   `json:"mode,omitempty"`
	RequestID string                 `json:"request_id,omitempty"`
	Content   string                 `json:"content,omitempty"`
	Source    agentcontroller.Source `json:"source"`
	From      string                 `json:"from"`
	Hops      int                    `json:"hops"`
}

func startFloor(tb testing.TB, srv *server.Server) *floor {
	tb.Helper()
	responder, err := nats.Connect(srv.ClientURL())
	if err != nil {
		tb.Fatal(err)
	}
	requester, err := nats.Connect(srv.ClientURL())
	if err != nil {
		responder.Close()
		tb.Fatal(err)
	}
	answer := []byte(`{"message_id":"0b7c5a52-6f8e-4f4c-9a43-1f1d2b7e9c10"}`)
	sub, err := responder.Subscribe(floorSubject, func(m *nats.Msg) {
		if err := m.Respond(answer); err != nil {
			tb.Error(err)
		}
	})
	if err == nil {
		err = responder.Flush()
	}
	if err != nil {
		responder.Close()
		requester.Close()
		tb.Fatal(err)
	}
	rid := "bench-123456"
	payload, _ := json.Marshal(floorRequest{Op: "prompt", Session: "bench-0", Mode: agentcontroller.Followup,
		RequestID: rid, Content: "bench prompt " + rid, From: "b", Hops: 1})
	return &floor{requester: requester, responder: responder, sub: sub, payload: payload}
}

func (f *floor) roundTrip(tb testing.TB) {
	if _, err := f.requester.Request(floorSubject, f.payload, 5*time.Second); err != nil {
		tb.Fatalf("floor request: %v", err)
	}
}

func (f *floor) close() {
	_ = f.sub.Unsubscribe()
	f.requester.Close()
	f.responder.Close()
}

// natsFloor times n floor round trips on srv; it returns wall and CPU time
// per round trip.
func natsFloor(tb testing.TB, srv *server.Server, n int) (wall, cpu time.Duration) {
	tb.Helper()
	f := startFloor(tb, srv)
	defer f.close()
	f.roundTrip(tb) // the requester's response subscription
	start, cpu0 := time.Now(), cpuTime()
	for range n {
		f.roundTrip(tb)
	}
	return time.Since(start) / time.Duration(n), (cpuTime() - cpu0) / time.Duration(n)
}

// leaseGet times n reads of a session's lease from the lease bucket, as
// a forwarding host reads it (from the leader), and n by direct get, on a
// connection of its own; leaderCPU is the process's CPU time per leader
// read, the server's included (it runs in the process).
func leaseGet(b *testing.B, bc *benchCluster, n int) (leader, leaderCPU, direct time.Duration) {
	b.Helper()
	nc, err := nats.Connect(bc.srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := stdctx.Background()
	kv, err := js.KeyValue(ctx, natsplugin.LeaseBucket(bc.stream))
	if err != nil {
		b.Fatal(err)
	}
	timed := func(kv jetstream.KeyValue) time.Duration {
		start := time.Now()
		for range n {
			if _, err := kv.Get(ctx, bc.ids[0]); err != nil {
				b.Fatalf("reading the lease of %s: %v", bc.ids[0], err)
			}
		}
		return time.Since(start) / time.Duration(n)
	}
	cpu0 := cpuTime()
	leader = timed(natsplugin.LeaderKV(kv, nc))
	leaderCPU = (cpuTime() - cpu0) / time.Duration(n)
	return leader, leaderCPU, timed(kv)
}
