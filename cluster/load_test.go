package cluster_test

import (
	stdctx "context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/plugin"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The cluster load test's size. By default it is small enough for CI under
// -race on two cores; -load.full is issue 18's size, and each flag
// overrides one figure of either.
var (
	loadFull     = flag.Bool("load.full", false, "run TestClusterLoad at full size: 1000 sessions over 3 hosts, 100 prompts/s for 60s")
	loadSessions = flag.Int("load.sessions", 0, "TestClusterLoad: sessions spread over the hosts (0: the size's default)")
	loadRate     = flag.Float64("load.rate", 0, "TestClusterLoad: prompts per second over all sessions (0: default)")
	loadDuration = flag.Duration("load.duration", 0, "TestClusterLoad: how long prompts are sent (0: default)")
)

// loadLeaseTTL is the lease TTL of the load test's hosts: the default of a
// real cluster. The 3s of the other tests would renew 1,000 leases 1,000
// times a second, a load no deployment is configured for.
const loadLeaseTTL = cluster.DefaultLeaseTTL

// loadHosts is how many hosts the sessions spread over.
const loadHosts = 3

// agentErrors are the agent errors (a failed flush of a session log,
// say) the load hosts reported, by the key of their clusterload.errors
// entry: a prompt can be accepted and its log still fail to be stored, and
// the error says why.
var agentErrors = struct {
	sync.Mutex
	m map[string][]string
}{m: map[string][]string{}}

type agentErrorsConfig struct {
	Key string `koanf:"key" json:"key"`
}

func init() {
	plugin.Register("clusterload.errors", "records the agent errors of a host under a key (tests only)", func(ctx *dshctx.Context, cfg agentErrorsConfig) error {
		_, err := agents.EventError.On(ctx, func(_ stdctx.Context, r agents.ErrorReport) error {
			agentErrors.Lock()
			agentErrors.m[cfg.Key] = append(agentErrors.m[cfg.Key], fmt.Sprintf("agent %s: %v", r.Agent.ID(), r.Err))
			agentErrors.Unlock()
			return nil
		})
		return err
	})
}

// agentErrors returns what the hosts of the cluster reported so far.
func (lc *loadCluster) agentErrors() []string {
	agentErrors.Lock()
	defer agentErrors.Unlock()
	var out []string
	for _, n := range lc.nodes {
		out = append(out, agentErrors.m[lc.stream+"/"+n.id]...)
	}
	return out
}

type loadConfig struct {
	sessions int
	rate     float64
	duration time.Duration
	// retryEvery: every retryEvery-th prompt is sent a second time, at
	// the same moment, with the same request id through another host; both
	// must get the same message id and the log must hold it once.
	retryEvery int
	// settle bounds the wait, after the last prompt, for every session to
	// be idle with every accepted prompt in its stored log.
	settle time.Duration
}

func loadConfigFromFlags() loadConfig {
	c := loadConfig{sessions: 60, rate: 20, duration: 3 * time.Second, retryEvery: 10, settle: time.Minute}
	if *loadFull {
		c = loadConfig{sessions: 1000, rate: 100, duration: 60 * time.Second, retryEvery: 10, settle: 5 * time.Minute}
	}
	if *loadSessions > 0 {
		c.sessions = *loadSessions
	}
	if *loadRate > 0 {
		c.rate = *loadRate
	}
	if *loadDuration > 0 {
		c.duration = *loadDuration
	}
	return c
}

// TestClusterLoad: sessions spread over three hosts sharing one NATS
// server, prompts at a fixed rate each sent through a random host's
// cluster.Host.Prompt — about two in three reach their session's owner
// forwarded over NATS — and every tenth sent twice at once through two
// hosts with the same request id. When every session is idle again, each
// session's log as stored in JetStream must hold every accepted request id
// exactly once, no other, with contiguous seqs and every turn ended. The
// accept latencies of forwarded and local prompts, and their ratio, are
// logged; run it with -v to see them.
func TestClusterLoad(t *testing.T) {
	cfg := loadConfigFromFlags()
	lc := startLoadCluster(t, loadLeaseTTL)
	opened := time.Now()
	ids := lc.openSessions(t, cfg.sessions)
	t.Logf("opened %d sessions over %d hosts in %v", len(ids), len(lc.nodes), time.Since(opened).Round(time.Millisecond))
	res := lc.run(t, cfg, ids)
	lc.settle(t, cfg, ids)
	logs := readLogs(t, lc.srv.ClientURL(), lc.stream, lc.prefix)
	res.check(t, lc, ids, logs)
	res.log(t, cfg)
}

// loadCluster is loadHosts hosts on one embedded NATS server.
type loadCluster struct {
	srv            *server.Server
	stream, prefix string
	nodes          []*node
	// owner is the index in nodes of the host each session was opened on.
	owner map[string]int
}

func startLoadCluster(tb testing.TB, ttl time.Duration) *loadCluster {
	tb.Helper()
	return startLoadClusterWith(tb, ttl, 0)
}

// startLoadClusterWith makes the hosts' scripted model wait delay before
// each chunk of an answer: a long one holds a turn.
func startLoadClusterWith(tb testing.TB, ttl, delay time.Duration) *loadCluster {
	tb.Helper()
	srv := startLoadServer(tb)
	stream := streamName()
	lc := &loadCluster{srv: srv, stream: stream, prefix: "dsh.t." + stream, owner: map[string]int{}}
	for i := range loadHosts {
		lc.nodes = append(lc.nodes, startLoadNode(tb, srv, stream, string(rune('a'+i)), ttl, delay))
	}
	return lc
}

// startLoadServer is startServer for benchmarks too.
func startLoadServer(tb testing.TB) *server.Server { return natstest.Single(tb) }

// startLoadNode is startNode for benchmarks too, with the lease TTL given:
// host id on the server's stream with session.nats and the scripted model
// (which echoes each prompt, waiting delay before each chunk), joined to
// the cluster.
func startLoadNode(tb testing.TB, srv *server.Server, stream, id string, ttl, delay time.Duration) *node {
	tb.Helper()
	yaml := fmt.Sprintf(`plugins:
  - use: clusterload.errors
    config: {key: %q}
  - use: llm.scripted
    config: {delay: %s}
  - use: session.nats
    config: {url: %q, stream: %q, subject_prefix: %q, lease_ttl: %s, host_id: %q}
agents:
  - id: main
    provider: scripted
`, stream+"/"+id, delay, srv.ClientURL(), stream, "dsh.t."+stream, ttl, id)
	cfg, err := config.Parse("load.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		tb.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	n := &node{id: id, h: h, cfg: cfg}
	tb.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 2*time.Minute)
		defer cancel()
		if n.c != nil {
			if err := n.c.Close(ctx); err != nil {
				tb.Errorf("closing the membership of host %s: %v", id, err)
			}
		}
		if err := h.Close(ctx); err != nil {
			tb.Errorf("closing host %s: %v", id, err)
		}
	})
	opts := clusterOptions(srv, stream, id, h)
	// A forwarded request's target says at once that it works on it; a
	// second of silence under -race on a busy machine is not a dead host.
	opts.LeaseTTL, opts.RequestTimeout = ttl, cluster.DefaultRequestTimeout
	if n.c, err = cluster.Join(stdctx.Background(), opts); err != nil {
		tb.Fatal(err)
	}
	return n
}

// openSessions opens n sessions, the i-th on host i mod loadHosts, as
// `dsh serve` would (KeepRunning).
func (lc *loadCluster) openSessions(tb testing.TB, n int) []string {
	tb.Helper()
	ids := make([]string, n)
	errc := make(chan error, n)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				_, err := lc.nodes[i%len(lc.nodes)].h.Sessions().Open(stdctx.Background(),
					sessions.OpenOptions{Agent: "main", SessionID: ids[i], KeepRunning: true})
				if err != nil {
					errc <- fmt.Errorf("opening session %s on host %s: %w", ids[i], lc.nodes[i%len(lc.nodes)].id, err)
				}
			}
		})
	}
	for i := range n {
		ids[i] = fmt.Sprintf("load-%04d", i)
		lc.owner[ids[i]] = i % len(lc.nodes)
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errc)
	for err := range errc {
		tb.Fatal(err)
	}
	return ids
}

// loadSent is one Prompt call and what it returned.
type loadSent struct {
	requestID, session string
	via                int // index of the host it was sent through
	forwarded          bool
	retry              bool
	latency            time.Duration
	messageID          string
	err                error
}

type loadResult struct {
	sent      []loadSent
	wall, cpu time.Duration
	// late counts the sends that started more than 10ms after their
	// slot: the sender itself fell behind the rate.
	late int
	// floor are the round trips of a bare NATS request/reply sent beside
	// each prompt, on the same server under the same load; floorErrs
	// are those that failed.
	floor     []time.Duration
	floorErrs []error
}

// run sends prompts at cfg.rate for cfg.duration, each in its own
// goroutine so a slow answer does not hold back the next one.
func (lc *loadCluster) run(t *testing.T, cfg loadConfig, ids []string) *loadResult {
	t.Helper()
	total := int(cfg.rate * cfg.duration.Seconds())
	interval := time.Duration(float64(time.Second) / cfg.rate)
	rng := rand.New(rand.NewPCG(18, 18))
	res := &loadResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), cfg.duration+cfg.settle)
	defer cancel()
	send := func(s loadSent) {
		defer wg.Done()
		start := time.Now()
		s.messageID, s.err = lc.nodes[s.via].c.Prompt(ctx, s.session, agentcontroller.Followup,
			sessions.PromptRequest{RequestID: s.requestID, Content: "load prompt " + s.requestID})
		s.latency = time.Since(start)
		mu.Lock()
		res.sent = append(res.sent, s)
		mu.Unlock()
	}
	fl := startFloor(t, lc.srv)
	defer fl.close()
	probe := func() {
		defer wg.Done()
		start := time.Now()
		_, err := fl.requester.Request(floorSubject, fl.payload, 5*time.Second)
		d := time.Since(start)
		mu.Lock()
		if err != nil {
			res.floorErrs = append(res.floorErrs, err)
		} else {
			res.floor = append(res.floor, d)
		}
		mu.Unlock()
	}
	start, cpu0 := time.Now(), cpuTime()
	for k := range total {
		slot := start.Add(time.Duration(k) * interval)
		if d := time.Until(slot); d > 0 {
			time.Sleep(d)
		} else if d < -10*time.Millisecond {
			res.late++
		}
		id := ids[rng.IntN(len(ids))]
		via := rng.IntN(len(lc.nodes))
		s := loadSent{requestID: fmt.Sprintf("p%06d", k), session: id, via: via, forwarded: via != lc.owner[id]}
		wg.Add(2)
		go send(s)
		go probe()
		if cfg.retryEvery > 0 && k%cfg.retryEvery == 0 {
			r := s
			r.retry = true
			r.via = (via + 1 + rng.IntN(len(lc.nodes)-1)) % len(lc.nodes)
			r.forwarded = r.via != lc.owner[id]
			wg.Add(1)
			go send(r)
		}
	}
	wg.Wait()
	res.wall, res.cpu = time.Since(start), cpuTime()-cpu0
	return res
}

// settle waits until every session is idle on its owner.
func (lc *loadCluster) settle(tb testing.TB, cfg loadConfig, ids []string) {
	tb.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), cfg.settle)
	defer cancel()
	for _, id := range ids {
		n := lc.nodes[lc.owner[id]]
		if err := n.h.Sessions().Idle(ctx, id); err != nil {
			tb.Fatalf("session %s on its owner %s is not idle %v after the last prompt (or is no longer open there): %v", id, n.id, cfg.settle, err)
		}
	}
}

// readLogs reads every session log of the stream as JetStream stores it,
// by session id, in stream order.
func readLogs(tb testing.TB, url, stream, prefix string) map[string][]session.Event {
	tb.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 2*time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string][]session.Event{}
	if info.State.Msgs == 0 {
		return out
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	for read := uint64(0); read < info.State.LastSeq; {
		// No more than is left, so the last batch does not wait out
		// its time for messages that will never come.
		batch, err := cons.Fetch(int(min(1000, info.State.LastSeq-read)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			tb.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				tb.Fatal(err)
			}
			read = meta.Sequence.Stream
			id, ok := strings.CutPrefix(m.Subject(), prefix+".")
			if !ok {
				tb.Fatalf("stream %s holds a message on subject %s, outside the session logs", stream, m.Subject())
			}
			if natsplugin.IsOpenRecord(m.Headers()) {
				continue
			}
			var e session.Event
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				tb.Fatalf("stream seq %d on %s is not a session event: %v", read, m.Subject(), err)
			}
			out[id] = append(out[id], e)
		}
		if err := batch.Error(); err != nil {
			tb.Fatal(err)
		}
		if got == 0 {
			tb.Fatalf("read the stream up to seq %d of %d, then nothing came for 5s", read, info.State.LastSeq)
		}
	}
	return out
}

// check: no refusal and no agent error; a retry got its original's message id; every
// session's stored log is contiguous from seq 1, holds each accepted
// request id of the session exactly once and no other, with as many turn
// ends as starts.
func (r *loadResult) check(t *testing.T, lc *loadCluster, ids []string, logs map[string][]session.Event) {
	t.Helper()
	want := map[string]map[string]string{} // session → request id → message id
	var problems []string
	fail := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	refused := map[string]int{}
	for _, s := range r.sent {
		if s.err != nil {
			refused[string(errs.CodeOf(s.err))]++
			fail("prompt %s to session %s via host %s (forwarded %v, retry %v): %v", s.requestID, s.session, lc.nodes[s.via].id, s.forwarded, s.retry, s.err)
			continue
		}
		m := want[s.session]
		if m == nil {
			m = map[string]string{}
			want[s.session] = m
		}
		if prev, ok := m[s.requestID]; ok && prev != s.messageID {
			fail("request %s of session %s got message ids %s and %s", s.requestID, s.session, prev, s.messageID)
		}
		m[s.requestID] = s.messageID
	}
	var lost, doubled, stray, gaps, unended int
	for _, id := range ids {
		events := logs[id]
		seen := map[string]int{}
		starts, ends := 0, 0
		for i, e := range events {
			if e.Seq != int64(i+1) {
				gaps++
				fail("session %s: event %d of its stored log has seq %d", id, i+1, e.Seq)
				break
			}
			switch e.Type {
			case session.TurnStart:
				starts++
			case session.TurnEnd:
				ends++
			case session.UserMessage, session.SteeringMessage:
				if e.RequestID == "" {
					continue
				}
				seen[e.RequestID]++
				if e.Message == nil || want[id][e.RequestID] != e.Message.ID {
					var mid string
					if e.Message != nil {
						mid = e.Message.ID
					}
					if _, ok := want[id][e.RequestID]; !ok {
						stray++
						fail("session %s logs request %s, which was not accepted for it", id, e.RequestID)
					} else {
						fail("session %s logs request %s as message %s, accepted as %s", id, e.RequestID, mid, want[id][e.RequestID])
					}
				}
			}
		}
		if starts != ends {
			unended++
			fail("session %s: %d turns started, %d ended", id, starts, ends)
		}
		for rid := range want[id] {
			switch n := seen[rid]; {
			case n == 0:
				lost++
				fail("session %s: accepted request %s is not in its stored log", id, rid)
			case n > 1:
				doubled++
				fail("session %s: request %s is in its stored log %d times", id, rid, n)
			}
		}
	}
	for _, e := range lc.agentErrors() {
		fail("%s", e)
	}
	for id := range logs {
		if _, ok := lc.owner[id]; !ok {
			fail("the stream holds a log of session %s, which the test never opened", id)
		}
	}
	t.Logf("%d prompt calls (%d retries); refused %v; lost %d, doubled %d, stray %d; %d sessions with a seq gap, %d with a turn not ended",
		len(r.sent), r.retries(), refused, lost, doubled, stray, gaps, unended)
	if len(problems) > 0 {
		t.Errorf("the cluster under load:\n  %s", strings.Join(problems, "\n  "))
	}
}

func (r *loadResult) retries() int {
	n := 0
	for _, s := range r.sent {
		if s.retry {
			n++
		}
	}
	return n
}

// log reports the accept latencies of first sends (retries are left out:
// they race their original), forwarded beside local, and the ratio.
func (r *loadResult) log(t *testing.T, cfg loadConfig) {
	var local, fwd []time.Duration
	for _, s := range r.sent {
		if s.retry || s.err != nil {
			continue
		}
		if s.forwarded {
			fwd = append(fwd, s.latency)
		} else {
			local = append(local, s.latency)
		}
	}
	lp50, lp99, lmax := percentiles(local)
	fp50, fp99, fmax := percentiles(fwd)
	np50, np99, nmax := percentiles(r.floor)
	var b strings.Builder
	fmt.Fprintf(&b, "%d sessions, %g prompts/s for %v: %d sent in %v (%d behind their slot by >10ms), process CPU %v (%.2f cores)\n",
		cfg.sessions, cfg.rate, cfg.duration, len(local)+len(fwd), r.wall.Round(time.Millisecond), r.late,
		r.cpu.Round(time.Millisecond), r.cpu.Seconds()/r.wall.Seconds())
	fmt.Fprintf(&b, "%-22s %10s %10s %10s %8s\n", "accept latency", "p50", "p99", "max", "samples")
	fmt.Fprintf(&b, "%-22s %10v %10v %10v %8d\n", "local", lp50, lp99, lmax, len(local))
	fmt.Fprintf(&b, "%-22s %10v %10v %10v %8d\n", "forwarded", fp50, fp99, fmax, len(fwd))
	fmt.Fprintf(&b, "%-22s %10v %10v %10v %8d\n", "floor: NATS req/reply", np50, np99, nmax, len(r.floor))
	if lp50 > 0 && lp99 > 0 && np50 > 0 && np99 > 0 {
		fmt.Fprintf(&b, "forwarded/local: p50 %.2fx, p99 %.2fx; forwarded/floor: p50 %.2fx, p99 %.2fx; local/floor: p50 %.2fx, p99 %.2fx",
			float64(fp50)/float64(lp50), float64(fp99)/float64(lp99),
			float64(fp50)/float64(np50), float64(fp99)/float64(np99),
			float64(lp50)/float64(np50), float64(lp99)/float64(np99))
	}
	t.Log("\n" + b.String())
	if len(r.floorErrs) > 0 {
		t.Errorf("%d floor round trips failed, the first: %v", len(r.floorErrs), r.floorErrs[0])
	}
	if len(local) == 0 || len(fwd) == 0 {
		t.Errorf("%d local and %d forwarded prompts: the run compared nothing; send more prompts", len(local), len(fwd))
	}
}

// percentiles returns p50, p99 and the max of d (sorted in place).
func percentiles(d []time.Duration) (p50, p99, mx time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return at(0.50), at(0.99), d[len(d)-1]
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
