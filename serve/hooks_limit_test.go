package serve_test

import (
	stdctx "context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/serve/webhook"
)

// A webhook's own max_body_bytes may be larger than the API's: the server
// leaves /hooks/ bodies to the webhook, which bounds each by its own limit.
func TestWebhookBodyLimitIsTheWebhooks(t *testing.T) {
	var hooks atomic.Pointer[webhook.Handler]
	mount := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hooks.Load().ServeHTTP(w, r) })
	e := newEnv(t, envOpts{hooks: mount, serve: "  max_body_bytes: 1024\n  webhooks:\n    big:\n      secret_env: BIG_SECRET\n" +
		"      max_body_bytes: 8192\n      prompt: \"big {{len .Raw}}\"\n"})
	hk, err := webhook.New(webhook.Options{Sessions: e.h.Sessions(), Config: e.h.Config(), Getenv: func(string) string { return "s3" }})
	if err != nil {
		t.Fatal(err)
	}
	hooks.Store(hk)
	t.Cleanup(func() { hk.Close(stdctx.Background()) })
	sign := func(body string) http.Header {
		mac := hmac.New(sha256.New, []byte("s3"))
		mac.Write([]byte(body))
		return http.Header{"X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(mac.Sum(nil))}}
	}
	body := `{"pad":"` + strings.Repeat("x", 4000) + `"}`
	if r := e.raw("POST", "/hooks/big", body, sign(body)); r.status != http.StatusAccepted {
		t.Fatalf("a 4 KB delivery to a webhook taking 8 KB: %d %s", r.status, r.body)
	}
	body = `{"pad":"` + strings.Repeat("x", 9000) + `"}`
	if r := e.raw("POST", "/hooks/big", body, sign(body)); r.status != http.StatusRequestEntityTooLarge || r.err(t).Code != "SERVE_BODY_TOO_LARGE" {
		t.Fatalf("a 9 KB delivery to a webhook taking 8 KB: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/v1/sessions", `{"agent":"main","pad":"`+strings.Repeat("x", 2000)+`"}`); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 2 KB API body with max_body_bytes 1024: %d %s", r.status, r.body)
	}
}
