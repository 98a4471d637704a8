package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
)

// TestClusterWebhookReachesTheSessionsOwner: two `dsh serve` hosts of one
// cluster; a webhook delivered to host b for a session host a runs is
// forwarded to a (b's webhooks deliver through the cluster's session
// service), where the controller alone answered 409 SESSION_LOCKED.
func TestClusterWebhookReachesTheSessionsOwner(t *testing.T) {
	url := natstest.Single(t).ClientURL()
	token, secret := "cluster-hook-token-77d2", "cluster-hook-secret"
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`plugins:
  - use: llm.scripted
agents:
  - id: main
    provider: scripted
cluster:
  nats: {url: %q}
  lease_ttl: 2s
serve:
  webhooks:
    push:
      secret_env: PUSH_SECRET
      session: hook-s
      prompt: "pushed {{.Raw}}"
log: {level: warn}
`, url)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"DSH_SERVE_TOKEN=" + token, "PUSH_SECRET=" + secret}
	a := startServe(t, path, append(env, "DSH_CLUSTER__HOST_ID=a")...)
	b := startServe(t, path, append(env, "DSH_CLUSTER__HOST_ID=b")...)
	call := func(base, method, path, body string, header map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	if code, out := call(a.base, "POST", "/v1/sessions", `{"session_id":"hook-s"}`, nil); code != 201 {
		t.Fatalf("opening hook-s on a: %d %s", code, out)
	}
	body := `{"ref":"main"}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	sig := map[string]string{"X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil))}
	// b may not have joined yet when its listening line comes: until it
	// has, the webhook is refused as retryable.
	var code int
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, out = call(b.base, "POST", "/hooks/push", body, sig)
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != http.StatusAccepted {
		t.Fatalf("the webhook on host b answered %d %s\nb:\n%s", code, out, b.log.String())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, events := call(a.base, "GET", "/v1/sessions/hook-s/events", "", nil)
		if strings.Contains(events, `pushed {\"ref\":\"main\"}`) && strings.Contains(events, "turn/end") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host a's session never got the delivery: %s\na:\n%s\nb:\n%s", events, a.log.String(), b.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
