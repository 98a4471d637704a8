package nats_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/natstest"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/session/backendtest"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestOnAThreeNodeCluster runs the store on a JetStream cluster of three
// nodes with replicas 3, the setup the replicas option is for. The subtests
// share one cluster, which takes longer to form than most of them take to
// run; the one that stops nodes runs last and restarts them.
func TestOnAThreeNodeCluster(t *testing.T) {
	c := natstest.Start(t, 3)
	t.Run("ConcurrentClaimsHaveOneWinner", func(t *testing.T) { concurrentClaimsOnACluster(t, c) })
	t.Run("AFlushIsReadBackThroughEveryNode", func(t *testing.T) { aFlushIsReadBackThroughEveryNode(t, c) })
	t.Run("ALongFlushIsNotFencedByItself", func(t *testing.T) { aLongFlushIsNotFencedByItself(t, c) })
	t.Run("AStaleOwnerIsFenced", func(t *testing.T) { aStaleOwnerIsFenced(t, c) })
	t.Run("AStaleOwnerIsFencedBeforeTheNewOneWrites", func(t *testing.T) { aStaleOwnerIsFencedBeforeTheNewOneWrites(t, c) })
	t.Run("Conformance", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) backendtest.Fixture {
			cfg := clusterConfig(c.URLs())
			return backendtest.Fixture{Plugin: natsplugin.Plugin, Config: func() any { x := *cfg; return &x }}
		})
	})
	t.Run("PagesThroughEveryNode", func(t *testing.T) { pagesThroughEveryNode(t, c) })
	t.Run("ARevisionConflictIsToldFromAFailure", func(t *testing.T) { aRevisionConflictIsToldFromAFailure(t, c) })
	t.Run("WritesGoOnWithANodeStopped", func(t *testing.T) { writesGoOnWithANodeStopped(t, c) })
}

// clusterConfig is the plugin's config for url, on a stream of its own
// kept by three servers.
func clusterConfig(url string) *natsplugin.Config {
	cfg := pluginConfig(url)
	cfg.Replicas = 3
	return cfg
}

// at is cfg for another host: the same stream, through url.
func at(cfg *natsplugin.Config, url, hostID string) *natsplugin.Config {
	c := *cfg
	c.URL, c.HostID = url, hostID
	return &c
}

// appendTurn appends one whole turn whose messages name who wrote them.
func appendTurn(s *session.Session, n int, who string) {
	s.Append(bg, session.Event{Type: session.TurnStart, Turn: n})
	s.Append(bg, session.Event{Type: session.UserMessage, Turn: n, Message: &llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("%s asks %d", who, n)}})
	s.Append(bg, session.Event{Type: session.AssistantMessage, Turn: n, Message: &llm.Message{Role: llm.RoleAssistant, Content: fmt.Sprintf("%s answers %d", who, n)}, Finish: llm.FinishStop})
	s.Append(bg, session.Event{Type: session.TurnEnd, Turn: n, Reason: "completed"})
}

// wholeLog fails unless events are the turns of whos, in order, each
// whole: four events a turn, numbered from 1 without a gap.
func wholeLog(t *testing.T, events []session.Event, whos ...string) {
	t.Helper()
	if len(events) != 4*len(whos) {
		t.Fatalf("the log holds %d events; %d turns of 4 were written: %+v", len(events), len(whos), events)
	}
	types := []session.Type{session.TurnStart, session.UserMessage, session.AssistantMessage, session.TurnEnd}
	for i, e := range events {
		n := i/4 + 1
		if e.Seq != int64(i+1) || e.Turn != n || e.Type != types[i%4] {
			t.Fatalf("event %d is %+v; want seq %d, turn %d, type %s", i+1, e, i+1, n, types[i%4])
		}
		if e.Type == session.UserMessage && e.Message.Content != fmt.Sprintf("%s asks %d", whos[n-1], n) {
			t.Fatalf("turn %d was asked %q; want it written by %s", n, e.Message.Content, whos[n-1])
		}
	}
}

// concurrentClaimsOnACluster: three hosts, each connected to another node,
// open one session at once; exactly one gets it, and the others are told
// another process holds it.
func concurrentClaimsOnACluster(t *testing.T, c *natstest.Cluster) {
	cfg := clusterConfig(c.URL(0))
	type result struct {
		st  *session.Store
		s   *session.Session
		err error
	}
	results := make(chan result, c.Len())
	start := make(chan struct{})
	for i := 0; i < c.Len(); i++ {
		root, st := mustMount(t, at(cfg, c.URL(i), fmt.Sprintf("host-%d", i)))
		scope, _ := root.Scoped("agent")
		go func() {
			<-start
			s, err := st.Create(scope, "agent", "s1")
			results <- result{st, s, err}
		}()
	}
	close(start)
	won := 0
	for i := 0; i < c.Len(); i++ {
		r := <-results
		switch {
		case r.err == nil:
			won++
			// Released only when every claim has answered: a release
			// before would free the session for a late claim.
			defer r.st.Close(r.s)
		case !errs.Has(r.err, session.SessionLocked, session.ReasonOtherProcess):
			t.Errorf("a losing claim: %v", r.err)
		}
	}
	if won != 1 {
		t.Fatalf("%d claims won", won)
	}
}

// aFlushIsReadBackThroughEveryNode: once a flush returns, a load through
// any node finds what it wrote — a host taking a session over reads its
// end there, and an end read from a replica still catching up would fence
// the new owner's first write, or resume it without the last turn. The
// window is short, so it is tried turn after turn, reading through every
// node at once: the longer the log, the likelier a replica lags.
func aFlushIsReadBackThroughEveryNode(t *testing.T, c *natstest.Cluster) {
	cfg := clusterConfig(c.URL(0))
	root, st := mustMount(t, cfg)
	var readers []*session.Store
	for i := 0; i < c.Len(); i++ {
		_, r := mustMount(t, at(cfg, c.URL(i), ""))
		readers = append(readers, r)
	}
	s := open(t, root, st, "s1")
	var whos []string
	for n := 1; n <= turnsReadBack; n++ {
		appendTurn(s, n, "w")
		whos = append(whos, "w")
		if err := s.Flush(bg); err != nil {
			t.Fatal(err)
		}
		loaded := make(chan error, len(readers))
		for i, r := range readers {
			go func() {
				events, err := r.Load(bg, "s1")
				if err == nil && len(events) != 4*n {
					err = fmt.Errorf("found %d events; %d were flushed", len(events), 4*n)
				}
				if err != nil {
					err = fmt.Errorf("loading through node %d after turn %d: %w", i, n, err)
				}
				loaded <- err
			}()
		}
		for range readers {
			if err := <-loaded; err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	events, err := readers[1].Load(bg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	wholeLog(t, events, whos...)
}

// turnsReadBack: a stale read showed in most runs by turn 35 or so, rarely
// before turn 20, when reads could be served by any replica.
const turnsReadBack = 40

// aLongFlushIsNotFencedByItself: a flush of many events publishes each
// right after the previous one's ack. A stream leader may still count the
// acked append in flight and refuse the next as "wrong last sequence"
// (10164); the writer must not take that for another writer's append. The
// window is short: several sessions flush at once to widen it.
func aLongFlushIsNotFencedByItself(t *testing.T, c *natstest.Cluster) {
	const sessions, turns = 4, 50
	cfg := clusterConfig(c.URL(0))
	root, st := mustMount(t, cfg)
	whos := make([]string, turns)
	flushed := make(chan error, sessions)
	for i := 0; i < sessions; i++ {
		s := open(t, root, st, fmt.Sprintf("s%d", i))
		for n := 1; n <= turns; n++ {
			appendTurn(s, n, "w")
			whos[n-1] = "w"
		}
		go func() { flushed <- s.Flush(bg) }()
	}
	for i := 0; i < sessions; i++ {
		if err := <-flushed; err != nil {
			t.Error(err)
		}
	}
	for i := 0; i < sessions && !t.Failed(); i++ {
		events, err := st.Load(bg, fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatal(err)
		}
		wholeLog(t, events, whos...)
	}
}

// aStaleOwnerIsFenced: host A stalls — its connection freezes, its lease
// renewals stop arriving — and its lease runs out; host B, on another
// node, resumes the session and writes a turn. When A comes back its next
// flush is refused as fenced, and nothing of it lands in the log.
func aStaleOwnerIsFenced(t *testing.T, c *natstest.Cluster) {
	cfg := clusterConfig(c.URL(0))
	cfg.LeaseTTL = time.Second
	cfg.ConnectTimeout = 2 * time.Second // how long a stalled renewal waits
	proxy := natstest.NewProxy(t, c.URL(0))
	rootA, a := mustMount(t, at(cfg, proxy.URL(), "a"))
	rootB, b := mustMount(t, at(cfg, c.URL(1), "b"))
	sA := open(t, rootA, a, "s1")
	appendTurn(sA, 1, "a")
	if err := sA.Flush(bg); err != nil {
		t.Fatal(err)
	}
	scopeB, _ := rootB.Scoped("agent")
	if _, err := b.Resume(bg, scopeB, "agent", "s1"); !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) || !strings.Contains(err.Error(), `host "a"`) {
		t.Fatalf("B resuming the session A holds: %v", err)
	}

	proxy.Freeze()
	sB := resumeWhenFree(t, b, scopeB, cfg.LeaseTTL)
	defer b.Close(sB)
	appendTurn(sB, 2, "b")
	if err := sB.Flush(bg); err != nil {
		t.Fatalf("B writing the session it took over: %v", err)
	}

	proxy.Thaw()
	appendTurn(sA, 2, "a")
	if err := sA.Flush(bg); !errs.Has(err, session.SessionLocked, session.ReasonFenced) {
		t.Fatalf("stale A's flush after B took over: %v", err)
	}
	events, err := b.Load(bg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	wholeLog(t, events, "a", "b")
}

// aStaleOwnerIsFencedBeforeTheNewOneWrites: as aStaleOwnerIsFenced, but
// stale A flushes before B has written anything. The log's end is still
// A's, so the expected sequence does not stop A; A must see that its lease
// ran out, or A's turn would land in the session B now owns and fence B.
func aStaleOwnerIsFencedBeforeTheNewOneWrites(t *testing.T, c *natstest.Cluster) {
	cfg := clusterConfig(c.URL(0))
	cfg.LeaseTTL = time.Second
	cfg.ConnectTimeout = 2 * time.Second
	proxy := natstest.NewProxy(t, c.URL(0))
	rootA, a := mustMount(t, at(cfg, proxy.URL(), "a"))
	rootB, b := mustMount(t, at(cfg, c.URL(1), "b"))
	sA := open(t, rootA, a, "s1")
	appendTurn(sA, 1, "a")
	if err := sA.Flush(bg); err != nil {
		t.Fatal(err)
	}
	scopeB, _ := rootB.Scoped("agent")
	proxy.Freeze()
	sB := resumeWhenFree(t, b, scopeB, cfg.LeaseTTL)
	defer b.Close(sB)

	proxy.Thaw()
	appendTurn(sA, 2, "a")
	if err := sA.Flush(bg); !errs.Has(err, session.SessionLocked, session.ReasonFenced) {
		t.Fatalf("stale A's flush after B took the session over: %v", err)
	}
	appendTurn(sB, 2, "b")
	if err := sB.Flush(bg); err != nil {
		t.Fatalf("B writing the session it took over: %v", err)
	}
	events, err := b.Load(bg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	wholeLog(t, events, "a", "b")
}

// resumeWhenFree resumes s1 through st as soon as the lease of its stalled
// holder has run out.
func resumeWhenFree(t *testing.T, st *session.Store, scope *dshctx.Context, ttl time.Duration) *session.Session {
	t.Helper()
	deadline := time.Now().Add(10 * ttl)
	for {
		s, err := st.Resume(bg, scope, "agent", "s1")
		if err == nil {
			return s
		}
		if !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) || time.Now().After(deadline) {
			t.Fatalf("resuming the session of a stalled host: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writesGoOnWithANodeStopped: a writer connected to one node flushes turns
// while another node is stopped, then while the stream's leader is; every
// flush succeeds, and the log reads back whole through a survivor and
// through the restarted nodes.
func writesGoOnWithANodeStopped(t *testing.T, c *natstest.Cluster) {
	const w = 0 // the writer's node
	base := clusterConfig(c.URL(w))
	// The readers are hosts already up when a node goes: starting one
	// then may wait for the cluster to elect its meta leader again.
	var readers []*session.Store
	for i := 0; i < c.Len(); i++ {
		_, r := mustMount(t, at(base, c.URL(i), ""))
		readers = append(readers, r)
	}
	cfg := at(base, c.URL(w), "")
	cfg.ConnectTimeout = 2 * time.Second // how long a flush waits for a leader
	// Longer than an election on a loaded machine (the lease bucket's
	// leader may be on the stopped node too): this test is about writes
	// outliving a node, not a lease running out, which others cover.
	cfg.LeaseTTL = 15 * time.Second
	root, st := mustMount(t, cfg)
	s := open(t, root, st, "s1")
	appendTurn(s, 1, "w")
	if err := s.Flush(bg); err != nil {
		t.Fatal(err)
	}
	// Neither the writer's node nor the leader: the plain loss of a replica.
	leader := c.MoveStreamLeader(cfg.Stream, w)
	replica := 3 - w - leader
	c.StopNode(replica)
	appendTurn(s, 2, "w")
	if err := s.Flush(bg); err != nil {
		t.Fatalf("flushing with node %d (a replica) stopped: %v", replica, err)
	}
	c.RestartNode(replica)
	c.WaitStreamCurrent(replica, cfg.Stream)

	// The stream's leader, so the survivors elect another. The handover
	// at shutdown is usually quick, but when it misses, the election waits
	// out raft's timeouts (seconds): a flush meanwhile fails as retryable
	// and keeps its events, which the next flush writes once, as the agent
	// loop's next checkpoint would.
	leader = c.MoveStreamLeader(cfg.Stream, w)
	c.StopNode(leader)
	appendTurn(s, 3, "w")
	stopped := time.Now()
	for {
		err := s.Flush(bg)
		if err == nil {
			break
		}
		if !errs.HasCode(err, session.FlushFailed) || time.Since(stopped) > 30*time.Second {
			t.Fatalf("flushing with node %d (the stream's leader) stopped: %v", leader, err)
		}
	}
	t.Logf("with the stream's leader stopped, the flush took %s", time.Since(stopped).Round(time.Millisecond))
	survivor := 3 - w - leader
	events, err := readers[survivor].Load(bg, "s1")
	if err != nil {
		t.Fatalf("loading through node %d: %v", survivor, err)
	}
	wholeLog(t, events, "w", "w", "w")

	c.RestartNode(leader)
	c.WaitStreamCurrent(leader, cfg.Stream)
	// A host starting updates the lease bucket too, whose leader may have
	// been on the stopped node as well.
	c.StreamLeader("KV_" + natsplugin.LeaseBucket(cfg.Stream))
	_, reader := mustMount(t, at(base, c.URL(leader), ""))
	if events, err = reader.Load(bg, "s1"); err != nil {
		t.Fatalf("loading through restarted node %d: %v", leader, err)
	}
	wholeLog(t, events, "w", "w", "w")
}

// aRevisionConflictIsToldFromAFailure: on a bucket of three replicas an
// update or a delete at a stale revision is a conflict (someone else
// wrote the key), which RevisionConflict recognises although its error
// code is not ErrKeyExists's: the leases, the host records and the
// schedule claims all decide by it.
func aRevisionConflictIsToldFromAFailure(t *testing.T, c *natstest.Cluster) {
	nc, err := natsgo.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "CONFLICT_" + streamName(), Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	first, err := kv.Put(ctx, "k", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("b")); err != nil {
		t.Fatal(err)
	}
	_, uerr := kv.Update(ctx, "k", []byte("c"), first)
	derr := kv.Delete(ctx, "k", jetstream.LastRevision(first))
	for what, err := range map[string]error{"update": uerr, "delete": derr} {
		if !natsplugin.RevisionConflict(err) {
			t.Errorf("an %s at a stale revision on a replicated bucket: %v; want a revision conflict", what, err)
		}
	}
	if natsplugin.RevisionConflict(errors.New("nats: timeout")) || natsplugin.RevisionConflict(nil) {
		t.Error("a failure or no error is taken for a conflict")
	}
}
