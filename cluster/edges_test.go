package cluster_test

import (
	"bytes"
	stdctx "context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/serve/webhook"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestEnsuringAnExistingSessionNeverStoredIsNotFound: through the cluster
// Service, on the host that would claim it and on one that forwards,
// Ensure in mode "existing" of an id nothing is stored under is
// SESSION_NOT_FOUND, and leaves no session behind anywhere: none open,
// none stored, no lease.
func TestEnsuringAnExistingSessionNeverStoredIsNotFound(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := serviceNode(t, srv, stream, "a", nodeOpts{})
	b := serviceNode(t, srv, stream, "b", nodeOpts{noOpen: true})
	o := sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "never"}, Mode: sessions.EnsureExisting}
	for _, n := range []*svcNode{a, b} {
		in, err := n.svc.Ensure(ctxT(t), o)
		if !errs.HasCode(err, session.NotFound) {
			t.Fatalf("ensure existing through host %s: %+v, %v; want SESSION_NOT_FOUND", n.id, in, err)
		}
	}
	for _, n := range []*svcNode{a, b} {
		if _, open := n.h.Sessions().Get("never"); open {
			t.Fatalf("host %s opened the session", n.id)
		}
	}
	if _, found, err := a.svc.Find(ctxT(t), "never"); err != nil || found {
		t.Fatalf("the refused ensure stored the session: found %v, %v", found, err)
	}
	if got := owner(t, leases(t, srv, stream), "never"); got != "" {
		t.Fatalf("the refused ensure left a lease naming %q", got)
	}
	// Created when the mode allows it, and saying so.
	o.Mode = sessions.EnsureAny
	if in, err := b.svc.Ensure(ctxT(t), o); err != nil || in.How != sessions.HowCreated {
		t.Fatalf("ensure through host b: %+v, %v; want created (on host a)", in, err)
	}
	a.session(t, "never")
}

// TestNoHostIsA503WithRetryAfterOnEveryEntryPoint: a host that claims no
// sessions, alone in its cluster, cannot place a new session anywhere:
// CLUSTER_NO_HOST, which a retry survives once a host that claims joins.
// The webhook and the HTTP API answer it alike — 503 with Retry-After —
// from the one mapping of serve/apierr; the webhook used to answer 500.
func TestNoHostIsA503WithRetryAfterOnEveryEntryPoint(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	b := serviceNode(t, srv, stream, "b", nodeOpts{noOpen: true, tail: `serve:
  webhooks:
    push:
      secret_env: PUSH_SECRET
      session: hook-s
      prompt: "pushed {{.Raw}}"
`})
	check := func(t *testing.T, via string, rec *httptest.ResponseRecorder) {
		t.Helper()
		var body struct{ Code string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s answered %d %q: %v", via, rec.Code, rec.Body, err)
		}
		if rec.Code != http.StatusServiceUnavailable || body.Code != string(cluster.NoHost) || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("%s answered %d %s, Retry-After %q; want 503 %s with Retry-After", via, rec.Code, rec.Body, rec.Header().Get("Retry-After"), cluster.NoHost)
		}
	}
	t.Run("webhook", func(t *testing.T) {
		hooks, err := webhook.New(webhook.Options{Sessions: b.svc, Config: b.cfg, Getenv: func(string) string { return hookSecret }})
		if err != nil {
			t.Fatal(err)
		}
		defer hooks.Close(ctxT(t))
		body := []byte(`{"ref":"main"}`)
		mac := hmac.New(sha256.New, []byte(hookSecret))
		mac.Write(body)
		req := httptest.NewRequest(http.MethodPost, "/hooks/push", bytes.NewReader(body))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		rec := httptest.NewRecorder()
		hooks.ServeHTTP(rec, req)
		check(t, "the webhook", rec)
	})
	t.Run("api", func(t *testing.T) {
		api(t, b.node)
		req := httptest.NewRequest(http.MethodPost, "/v1/sessions", strings.NewReader(`{"session_id": "api-s"}`))
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		b.api.Handler().ServeHTTP(rec, req)
		check(t, "the API", rec)
	})
}

// staleReplica makes direct gets of stream answered as by a replica that
// has applied nothing: the server stops answering them (AllowDirect off)
// while the handles the hosts bound before still send them, and a
// subscriber answers each "no message" — what a replica behind the leader
// answers for a lease taken or a log written since it last caught up.
func staleReplica(t *testing.T, url, stream string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(ctxT(t), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("$JS.API.DIRECT.GET."+stream+".>", func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Header.Set("Status", "404")
		r.Header.Set("Description", "Message Not Found")
		m.RespondMsg(r)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
}

// TestOwnershipAndLogEndsAreReadFromTheLeader: with every replica but the
// leader behind, host b still sees that host a owns the session — it
// forwards the prompt rather than claim the session (and be refused the
// lease) — and a Follower still finds where the log ends and an event in
// it: the reads that decide ownership and a stream's start go to the
// leader, never to a direct get.
func TestOwnershipAndLogEndsAreReadFromTheLeader(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := serviceNode(t, srv, stream, "a", nodeOpts{})
	b := serviceNode(t, srv, stream, "b", nodeOpts{})
	ctx := ctxT(t)
	if _, err := a.svc.Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "s1"}}); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"first", "second"} {
		turn, err := a.svc.Prompt(ctx, "s1", sessions.PromptRequest{Content: text})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := turn.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	f, err := cluster.NewFollower(cluster.Options{URL: srv.ClientURL(), Stream: stream, SubjectPrefix: "dsh.t." + stream})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, err := a.svc.Info(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the log to be stored", func() bool {
		seq, err := f.LastSeq(ctx, "s1")
		return err == nil && seq == in.LastSeq
	})
	staleReplica(t, srv.ClientURL(), "KV_"+natsplugin.LeaseBucket(stream))
	staleReplica(t, srv.ClientURL(), stream)

	turn, err := b.svc.Prompt(ctx, "s1", sessions.PromptRequest{Content: "via b"})
	if err != nil {
		t.Fatalf("a prompt through host b for host a's session: %v", err)
	}
	if _, err := turn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, open := b.h.Sessions().Get("s1"); open {
		t.Fatal("host b opened host a's session")
	}
	a.session(t, "s1")

	in, err = a.svc.Info(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the follower to read the log's end", func() bool {
		seq, err := f.LastSeq(ctx, "s1")
		return err == nil && seq == in.LastSeq
	})
	// From the middle of the log: the event after 2 is found in it.
	fctx, cancel := stdctx.WithCancel(ctx)
	defer cancel()
	var first int64
	err = f.Follow(fctx, "s1", 2, func(e session.Event) error {
		first = e.Seq
		return errStop
	})
	if !errors.Is(err, errStop) || first != 3 {
		t.Fatalf("following from seq 2: first seq %d, %v", first, err)
	}
}

var errStop = errors.New("stop")

// TestARemoteStreamEndsWhenTheSessionClosesOnItsOwner: a stream attached
// on host b, without approvals, to a session host a runs reads the log to
// its end and then ends with LIVE_HUB_CLOSED — what a stream attached on
// a gets — when a closes the session; it used to wait for events forever.
func TestARemoteStreamEndsWhenTheSessionClosesOnItsOwner(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := serviceNode(t, srv, stream, "a", nodeOpts{})
	b := serviceNode(t, srv, stream, "b", nodeOpts{noOpen: true})
	ctx := ctxT(t)
	if _, err := a.svc.Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "s1"}}); err != nil {
		t.Fatal(err)
	}
	st, err := b.svc.Attach(ctx, "s1", sessions.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	turn, err := a.svc.Prompt(ctx, "s1", sessions.PromptRequest{Content: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.svc.Close(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	sum, found, err := a.svc.Find(ctx, "s1")
	if err != nil || !found {
		t.Fatalf("the closed session is not stored: %v", err)
	}
	var seqs []int64
	for {
		u, err := st.Next(ctx)
		if err != nil {
			if !errs.HasCode(err, live.HubClosed) {
				t.Fatalf("the stream ended with %v after seqs %v; want %s", err, seqs, live.HubClosed)
			}
			break
		}
		if u.Kind == live.KindEvent {
			seqs = append(seqs, u.Seq)
		}
	}
	if len(seqs) == 0 || seqs[len(seqs)-1] != sum.LastSeq || st.LastSeq() != sum.LastSeq {
		t.Fatalf("the stream read seqs %v (last %d) before it ended; the log ends at %d", seqs, st.LastSeq(), sum.LastSeq)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("the stream read seqs %v: a gap or a repeat", seqs)
		}
	}
}

// askingNode starts host id whose claims open the agent "asker", whose
// model calls the asking tool once and then answers "done".
func askingNode(t *testing.T, srv *server.Server, stream, id string) *svcNode {
	t.Helper()
	yaml := fmt.Sprintf(`plugins:
  - use: llm.scripted
  - id: asking
    use: llm.scripted
    config: {name: asking, replies: [{tool_calls: [{name: ask}]}, {text: done}]}
  - use: clustertest.ask
  - use: session.nats
    config: {url: %q, stream: %q, subject_prefix: %q, lease_ttl: %s, host_id: %q}
agents:
  - id: main
    provider: scripted
  - id: asker
    provider: asking
`, srv.ClientURL(), stream, "dsh.t."+stream, leaseTTL, id)
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{id: id, h: h, cfg: cfg}
	t.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), patience)
		defer cancel()
		if n.c != nil {
			if err := n.c.Close(ctx); err != nil {
				t.Errorf("closing the membership of host %s: %v", id, err)
			}
		}
		if err := h.Close(ctx); err != nil {
			t.Errorf("closing host %s: %v", id, err)
		}
	})
	opts := clusterOptions(srv, stream, id, h)
	opts.Open = func(string) sessions.OpenOptions { return sessions.OpenOptions{Agent: "asker"} }
	if n.c, err = cluster.Join(stdctx.Background(), opts); err != nil {
		t.Fatal(err)
	}
	f, err := cluster.NewFollower(cluster.Options{URL: srv.ClientURL(), Stream: stream, SubjectPrefix: "dsh.t." + stream})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	svc := cluster.NewService(h.Sessions(), f)
	svc.Bind(n.c)
	return &svcNode{node: n, svc: svc}
}

// TestARelayedStreamFollowsTheSessionToItsNextOwner: a client attached
// with approvals through host b to a session whose owner dies (a ghost:
// it takes the relay, then says nothing and renews nothing) keeps its
// stream when host c adopts the session: the relay is attached again on
// c, c's question reaches the client, its answer runs the tool, and the
// events come in order, none twice, none skipped.
func TestARelayedStreamFollowsTheSessionToItsNextOwner(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	c := askingNode(t, srv, stream, "c")
	b := serviceNode(t, srv, stream, "b", nodeOpts{noOpen: true})
	ctx := ctxT(t)
	// Stored (its open record) and open nowhere.
	if _, err := c.svc.Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "asker", SessionID: "m1"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.svc.Close(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	// The ghost owns it, takes the relay and dies.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.Subscribe(cluster.RouteSubject(stream, "ghost"), func(m *nats.Msg) {
		m.Respond([]byte(`{"result":"\"ghost-relay\""}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(natsplugin.LeaseRecord{Holder: "a ghost", HostID: "ghost", Since: time.Now()})
	kv := leases(t, srv, stream)
	if _, err := kv.Create(ctx, "m1", rec); err != nil {
		t.Fatal(err)
	}
	st, err := b.svc.Attach(ctx, "m1", sessions.AttachOptions{Approvals: true, Name: "on-b"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eventually(t, "host c to adopt the session", func() bool { return owner(t, kv, "m1") == "c" })
	// A question is asked of the approvers attached when it comes: the
	// prompt goes once the stream's relay is on c.
	eventually(t, "host b's stream to attach its relay on host c", func() bool { return c.c.Relays() == 1 })
	turn, err := b.svc.Prompt(ctx, "m1", sessions.PromptRequest{RequestID: "q1", Content: "use the tool"})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	var result string
	asked := false
	for result == "" {
		nctx, cancel := stdctx.WithTimeout(ctx, patience/2)
		u, err := st.Next(nctx)
		cancel()
		if err != nil {
			t.Fatalf("host b's stream after seqs %v, asked %v: %v", seqs, asked, err)
		}
		switch {
		case u.Kind == live.KindQuestion && !asked:
			asked = true
			if err := st.Answer(u.Question.ID, approval.Answer{Choice: approval.AllowOnce}); err != nil {
				t.Fatal(err)
			}
		case u.Kind == live.KindEvent:
			seqs = append(seqs, u.Seq)
			if u.Event.Type == session.ToolResult {
				result = u.Event.Message.Content
			}
		}
	}
	if !asked || result != "the asked tool ran" {
		t.Fatalf("asked %v, the tool's result %q; want the question relayed from c and the tool run", asked, result)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("host b's stream read seqs %v: a gap or a repeat", seqs)
		}
	}
	if _, err := turn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}
