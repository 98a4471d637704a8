package nats_test

import (
	stdctx "context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/internal/natstest"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

var bg = stdctx.Background()

// mount starts the plugin in a dsh root of its own and returns the root's
// sessions service, or the plugin's start error.
func mount(t testing.TB, cfg *natsplugin.Config) (*dshctx.Context, *session.Store, error) {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	f, _ := root.Plugin(natsplugin.Plugin, cfg)
	if err := f.Await(bg); err != nil {
		return nil, nil, err
	}
	st, err := session.Key.Get(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, st, nil
}

func mustMount(t testing.TB, cfg *natsplugin.Config) (*dshctx.Context, *session.Store) {
	t.Helper()
	root, st, err := mount(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return root, st
}

func open(t testing.TB, root *dshctx.Context, st *session.Store, id string) *session.Session {
	t.Helper()
	scope, err := root.Scoped("agent-" + id)
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Create(scope, "agent", id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAnUnreachableServerIsExplained: the start fails with a stable code
// and a message naming the URL and the fix.
func TestAnUnreachableServerIsExplained(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close() // nothing listens there now
	cfg := pluginConfig(url)
	cfg.ConnectTimeout = time.Second
	_, _, err = mount(t, cfg)
	if !errs.HasCode(err, natsplugin.Unreachable) || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "nats-server -js") {
		t.Fatalf("starting against %s: %v", url, err)
	}
}

// TestAnAppendByAnotherWriterFencesTheOwner: a message some other writer
// put on the session's subject — a stale owner whose lease ran out, say —
// makes the next flush of the owner fail with SessionLocked, reason
// session/fenced, instead of interleaving the two logs.
func TestAnAppendByAnotherWriterFencesTheOwner(t *testing.T) {
	srv := startServer(t)
	cfg := pluginConfig(srv.ClientURL())
	root, st := mustMount(t, cfg)
	s := open(t, root, st, "s1")
	s.Append(bg, session.Event{Type: session.TurnStart, Turn: 1})
	if err := s.Flush(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := natstest.JetStream(t, srv.ClientURL()).Publish(bg, cfg.SubjectPrefix+".s1", []byte(`{"seq":2,"type":"turn/end","turn":1}`)); err != nil {
		t.Fatal(err)
	}
	s.Append(bg, session.Event{Type: session.UserMessage, Turn: 1})
	if err := s.Flush(bg); !errs.Has(err, session.SessionLocked, session.ReasonFenced) {
		t.Fatalf("the owner's flush after another append: %v", err)
	}
	events, err := st.Load(bg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[1].Type != session.TurnEnd {
		t.Fatalf("the log is %+v; the fenced writer's event must not be in it", events)
	}
	// Fenced for good: a later checkpoint does not write either.
	if err := s.Flush(bg); !errs.Has(err, session.SessionLocked, session.ReasonFenced) {
		t.Fatalf("a later flush: %v", err)
	}
}

// TestTheLeaseOfADeadHostRunsOut: a lease nobody renews — its host died —
// refuses others, naming the holder, until the lease TTL passes; then the
// session can be taken.
func TestTheLeaseOfADeadHostRunsOut(t *testing.T) {
	srv := startServer(t)
	cfg := pluginConfig(srv.ClientURL())
	cfg.LeaseTTL = time.Second
	root, st := mustMount(t, cfg)
	kv, err := natstest.JetStream(t, srv.ClientURL()).KeyValue(bg, natsplugin.LeaseBucket(cfg.Stream))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(bg, "s1", []byte(`{"holder":"process 7 on host \"gone\""}`)); err != nil {
		t.Fatal(err)
	}
	scope, _ := root.Scoped("agent")
	_, err = st.Create(scope, "agent", "s1")
	if !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) || !strings.Contains(err.Error(), `host "gone"`) {
		t.Fatalf("opening a session a dead host holds: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := st.Create(scope, "agent", "s1")
		if err == nil {
			st.Close(s)
			return
		}
		if !errs.HasCode(err, session.SessionLocked) || time.Now().After(deadline) {
			t.Fatalf("the dead host's lease never ran out: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAHeldLeaseIsRenewed: a live holder keeps its session past several
// lease TTLs; the moment it releases, another process may take it.
func TestAHeldLeaseIsRenewed(t *testing.T) {
	srv := startServer(t)
	cfg := pluginConfig(srv.ClientURL())
	cfg.LeaseTTL = time.Second
	rootA, a := mustMount(t, cfg)
	rootB, b := mustMount(t, cfg)
	s := open(t, rootA, a, "s1")
	scope, _ := rootB.Scoped("other")
	// Time must pass here: the lease would have expired three times over
	// without its renewals.
	time.Sleep(3 * cfg.LeaseTTL)
	if _, err := b.Create(scope, "other", "s1"); !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) {
		t.Fatalf("a renewed lease was lost: %v", err)
	}
	if err := a.Close(s); err != nil {
		t.Fatal(err)
	}
	s2, err := b.Create(scope, "other", "s1")
	if err != nil {
		t.Fatalf("a released session cannot be taken: %v", err)
	}
	b.Close(s2)
}

// TestConcurrentClaimsHaveOneWinner: three processes open one session at
// once; exactly one gets it.
func TestConcurrentClaimsHaveOneWinner(t *testing.T) {
	srv := startServer(t)
	cfg := pluginConfig(srv.ClientURL())
	type result struct {
		st  *session.Store
		s   *session.Session
		err error
	}
	results := make(chan result, 3)
	for i := 0; i < 3; i++ {
		root, st := mustMount(t, cfg)
		scope, _ := root.Scoped("agent")
		go func() {
			s, err := st.Create(scope, "agent", "s1")
			results <- result{st, s, err}
		}()
	}
	won := 0
	for i := 0; i < 3; i++ {
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

// TestALeaseNamesItsHost: in a cluster a lease says which host holds the
// session, so the others can route to it and a refused opener learns who
// has it.
func TestALeaseNamesItsHost(t *testing.T) {
	srv := startServer(t)
	cfg := pluginConfig(srv.ClientURL())
	cfg.HostID = "host-a"
	root, st := mustMount(t, cfg)
	s := open(t, root, st, "s1")
	defer st.Close(s)
	kv, err := natstest.JetStream(t, srv.ClientURL()).KeyValue(bg, natsplugin.LeaseBucket(cfg.Stream))
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(bg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	var rec natsplugin.LeaseRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.HostID != "host-a" {
		t.Fatalf("the lease entry %s names host %q (%v)", e.Value(), rec.HostID, err)
	}
	other := *cfg
	other.HostID = "host-b"
	rootB, b := mustMount(t, &other)
	scope, _ := rootB.Scoped("agent")
	if _, err := b.Create(scope, "agent", "s1"); !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) || !strings.Contains(err.Error(), `host "host-a"`) {
		t.Fatalf("host-b opening host-a's session: %v", err)
	}
}

// TestABadHostIDIsRefused: a host id becomes a subject token, so a dot or
// a wildcard in it is a config error, not a routing surprise.
func TestABadHostIDIsRefused(t *testing.T) {
	for _, id := range []string{"a.b", "a*", "a b"} {
		cfg := natsplugin.Config{}.Defaults()
		cfg.HostID = id
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "host_id") {
			t.Errorf("host_id %q: %v", id, err)
		}
	}
}

// TestARenewalWhoseAnswerWasLostKeepsTheLease: a renewal may land on the
// server though its answer never comes back; the entry is then at a
// revision the holder does not know. The holder's next renewal must see
// the entry is still its own rather than take the lease for lost and
// stop writing.
func TestARenewalWhoseAnswerWasLostKeepsTheLease(t *testing.T) {
	srv := startServer(t)
	cfg := pluginConfig(srv.ClientURL())
	cfg.LeaseTTL = time.Second
	root, st := mustMount(t, cfg)
	s := open(t, root, st, "s1")
	defer st.Close(s)
	kv, err := natstest.JetStream(t, srv.ClientURL()).KeyValue(bg, natsplugin.LeaseBucket(cfg.Stream))
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(bg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	// The lost renewal: the holder's own entry, written again.
	landed, err := kv.Update(bg, "s1", e.Value(), e.Revision())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * cfg.LeaseTTL)
	for {
		now, err := kv.Get(bg, "s1")
		if err != nil {
			t.Fatalf("the holder lost its lease after a renewal it did not hear of: %v", err)
		}
		if now.Revision() > landed {
			break // renewed after it
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease was not renewed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Append(bg, session.Event{Type: session.TurnStart, Turn: 1})
	if err := s.Flush(bg); err != nil {
		t.Fatalf("flushing after the renewal: %v", err)
	}
}
