package webhook_test

import (
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/testtools"
	"github.com/dsh-go/dsh/serve/webhook"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// newSpoolEnv is newEnv with the handler's spool in dir, replayed at start
// as dsh serve does.
func newSpoolEnv(t *testing.T, yaml, dir string) *env {
	t.Helper()
	testtools.ResetBlock()
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(stdctx.Background()) })
	hk, err := webhook.New(webhook.Options{Sessions: h.Sessions(), Config: cfg, Getenv: func(string) string { return secret }, Spool: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), wait)
		defer cancel()
		if err := hk.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	hk.Replay()
	mux := http.NewServeMux()
	mux.Handle("/hooks/", hk)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, h: h, cfg: cfg, hk: hk, srv: srv}
}

// spooledFiles lists the records in a spool directory.
func spooledFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// requestIDOf is the request id of a delivery of body to webhook name
// under GitHub's scheme (docs/webhooks.md), and the digest that names its
// own session.
func requestIDOf(name string, body []byte) (string, string) {
	sum := sha256.Sum256(body)
	digest := hex.EncodeToString(sum[:16])
	return "webhook:" + name + ":sha256-" + digest, digest
}

// spoolAs writes the record a process that crashed after its 202 would
// have left in the spool.
func spoolAs(t *testing.T, dir, hook, requestID, own, prompt string) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"version": 1, "hook": hook, "request_id": requestID, "own": own, "prompt": prompt, "accepted": time.Now()})
	sum := sha256.Sum256([]byte(requestID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, hex.EncodeToString(sum[:16])+".json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// An accepted delivery is in the spool until its turn ends with its
// outcome in the log, then nowhere; a refused one leaves nothing there.
func TestTheSpoolKeepsADeliveryUntilItsOutcomeIsLogged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	e := newSpoolEnv(t, base(t, "", "")+hooks, dir)
	expect(t, e.signed("push", []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"c"}}`), nil), http.StatusAccepted, "")
	expect(t, e.signed("fresh", []byte(`one`), nil), http.StatusAccepted, "")
	e.turnsEnded("hooks-push", 1)
	waitUntil(t, "the spool is empty", func() bool { return len(spooledFiles(t, dir)) == 0 })

	gatedDir := filepath.Join(t.TempDir(), "spool")
	gated := newSpoolEnv(t, base(t, "", "  - use: admission.ready-gate\n")+hooks, gatedDir)
	expect(t, gated.signed("push", []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"c"}}`), nil), http.StatusUnprocessableEntity, "SESSION_PROMPT_REJECTED")
	if names := spooledFiles(t, gatedDir); len(names) != 0 {
		t.Fatalf("a refused delivery stayed in the spool: %v", names)
	}
}

// What a crash left in the spool is delivered again at the next start:
// a delivery the session's log already holds runs nothing more, one it
// does not hold (it waited in the inbox) runs once, in its fixed session
// or in its own one; the spool is empty afterwards.
func TestASpooledDeliveryRunsOnceAfterARestart(t *testing.T) {
	store, dir := t.TempDir(), filepath.Join(t.TempDir(), "spool")
	yaml := baseIn(store, "", "") + hooks
	took := []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"took"}}`)
	before := newEnv(t, yaml)
	expect(t, before.signed("push", took, nil), http.StatusAccepted, "")
	before.turnsEnded("hooks-push", 1)
	before.srv.Close()
	if err := before.hk.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if err := before.h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}

	tookID, _ := requestIDOf("push", took)
	queuedID, _ := requestIDOf("push", []byte(`queued`))
	freshID, digest := requestIDOf("fresh", []byte(`fresh one`))
	spoolAs(t, dir, "push", tookID, "", "push : a/b by took")
	spoolAs(t, dir, "push", queuedID, "", "the queued delivery")
	spoolAs(t, dir, "fresh", freshID, "webhook-fresh-"+digest, "fresh fresh one")

	after := newSpoolEnv(t, yaml, dir)
	waitUntil(t, "the spool is empty", func() bool { return len(spooledFiles(t, dir)) == 0 })
	events := after.turnsEnded("hooks-push", 2)
	counts := map[string]int{}
	for _, ev := range of(events, session.UserMessage) {
		counts[ev.Message.Content]++
	}
	if len(counts) != 2 || counts["push : a/b by took"] != 1 || counts["the queued delivery"] != 1 {
		t.Fatalf("the fixed session's prompts after the replay: %v", counts)
	}
	var fresh *session.Summary
	for _, s := range after.persisted() {
		if s.ID == "webhook-fresh-"+digest {
			fresh = &s
		}
	}
	if fresh == nil || fresh.Turns != 1 {
		t.Fatalf("the spooled delivery's own session: %+v", fresh)
	}
	// A redelivery now is answered from the logs: nothing more runs.
	expect(t, after.signed("push", took, nil), http.StatusAccepted, "")
	if n := len(of(after.events("hooks-push"), session.UserMessage)); n != 2 {
		t.Fatalf("a redelivery after the replay added a prompt: %d", n)
	}
}
