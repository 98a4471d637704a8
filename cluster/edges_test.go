package cluster_test

import (
	"bytes"
	stdctx "context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/cluster"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/serve/webhook"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
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
