package nats_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestResumingAnIDNeverStoredIsNotFound: the session controller's Ensure
// in mode "existing" of an id the stream has no log of is
// SESSION_NOT_FOUND — not an empty session reported as resumed — and
// leaves nothing behind: no open record, no lease, so the id is still
// free to be created. Taking the lease for a resume must not be what
// makes the session exist.
func TestResumingAnIDNeverStoredIsNotFound(t *testing.T) {
	srv := startServer(t)
	stream := streamName()
	yaml := fmt.Sprintf(`plugins:
  - use: llm.scripted
  - use: session.nats
    config: {url: %q, stream: %q, subject_prefix: %q, lease_ttl: 3s}
agents:
  - id: main
    provider: scripted
`, srv.ClientURL(), stream, "dsh.resume."+stream)
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	ctx := stdctx.Background()
	svc := h.Sessions()
	o := sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "never"}, Mode: sessions.EnsureExisting}
	in, err := svc.Ensure(ctx, o)
	if !errs.HasCode(err, session.NotFound) {
		t.Fatalf("ensure existing of an id never stored: %+v, %v; want SESSION_NOT_FOUND", in, err)
	}
	if _, found, err := svc.Find(ctx, "never"); err != nil || found {
		t.Fatalf("the refused resume stored the session: found %v, %v", found, err)
	}
	if _, open := svc.Get("never"); open {
		t.Fatal("the refused resume left the session open")
	}
	// Nothing holds it: the same id is created, and says so.
	o.Mode = sessions.EnsureAny
	if in, err = svc.Ensure(ctx, o); err != nil || in.How != sessions.HowCreated {
		t.Fatalf("ensure of the id after the refused resume: %+v, %v; want created", in, err)
	}
	if err := svc.Close(ctx, "never"); err != nil {
		t.Fatal(err)
	}
	// Stored now (its open record), so a resume finds it.
	o.Mode = sessions.EnsureExisting
	if in, err = svc.Ensure(ctx, o); err != nil || in.How != sessions.HowResumed {
		t.Fatalf("ensure existing of the stored id: %+v, %v; want resumed", in, err)
	}
	if err := svc.Close(ctx, "never"); err != nil {
		t.Fatal(err)
	}
}

// TestLockStoredTakesNoLeaseForNothingStored: the store's resume lock of
// an id with no log fails with SESSION_NOT_FOUND and holds no lease, so
// a create of the id right after is not refused as locked.
func TestLockStoredTakesNoLeaseForNothingStored(t *testing.T) {
	srv := startServer(t)
	root, st := mustMount(t, pluginConfig(srv.ClientURL()))
	scope, err := root.Scoped("agent-x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Resume(bg, scope, "agent", "x"); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("resume of nothing stored: %v", err)
	}
	s, err := st.Create(scope, "agent", "x")
	if err != nil {
		t.Fatalf("create after a refused resume: %v", err)
	}
	if err := st.Close(s); err != nil {
		t.Fatal(err)
	}
}

// staleReplica makes direct gets of stream answered as by a replica that
// has applied nothing: the server stops answering them (AllowDirect off)
// while handles bound before still send them, and a subscriber answers
// each "no message". It is what a replica behind the leader answers for
// a key or a log written since it last caught up.
func staleReplica(t *testing.T, nc *natsgo.Conn, js jetstream.JetStream, stream string) {
	t.Helper()
	st, err := js.Stream(bg, stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(bg, cfg); err != nil {
		t.Fatal(err)
	}
	sub, err := nc.Subscribe("$JS.API.DIRECT.GET."+stream+".>", func(m *natsgo.Msg) {
		r := natsgo.NewMsg(m.Reply)
		r.Header.Set("Status", "404")
		r.Header.Set("Description", "Message Not Found")
		m.RespondMsg(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestLeaderKVReadsWhatTheLeaderHolds: a bucket read through LeaderKV
// sees an entry a stale replica does not have; the same bucket's own Get
// (a direct get) reports it absent.
func TestLeaderKVReadsWhatTheLeaderHolds(t *testing.T) {
	srv := startServer(t)
	nc, err := natsgo.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(bg, jetstream.KeyValueConfig{Bucket: "leaderkv"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(bg, "s.1", []byte("held by a")); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(bg, "gone", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(bg, "gone"); err != nil {
		t.Fatal(err)
	}
	staleReplica(t, nc, js, "KV_leaderkv")
	if _, err := kv.Get(bg, "s.1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the stale replica was not asked (the test proves nothing): %v", err)
	}
	lk := natsplugin.LeaderKV(kv, nc)
	e, err := lk.Get(bg, "s.1")
	if err != nil || string(e.Value()) != "held by a" || e.Key() != "s.1" || e.Revision() == 0 || e.Created().IsZero() {
		t.Fatalf("the leader read: %v, %v", e, err)
	}
	if _, err := lk.Get(bg, "gone"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a deleted key read from the leader: %v", err)
	}
	if _, err := lk.Get(bg, "never"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a key never written read from the leader: %v", err)
	}
	if _, err := lk.Get(bg, "bad key"); !errors.Is(err, jetstream.ErrInvalidKey) {
		t.Fatalf("an invalid key: %v", err)
	}
}
