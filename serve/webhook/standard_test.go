package webhook_test

import (
	stdctx "context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"
)

const standardHooks = `serve:
  webhooks:
    std:
      secret_env: STD_SECRET
      scheme: standard
      prompt: "std {{.Raw}}"
`

// signStandard signs a delivery as a Standard Webhooks sender does.
func signStandard(id string, at time.Time, body []byte) map[string]string {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return map[string]string{"Webhook-Id": id, "Webhook-Timestamp": ts,
		"Webhook-Signature": "v1,bm90IGl0 v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))}
}

// With the Standard Webhooks scheme the delivery id and the time are
// signed: the id is the dedup key (held across a restart by the session
// store), a replay outside the window is refused as stale, and the id
// cannot be swapped without breaking the signature.
func TestStandardWebhooksSignTheIDAndTheTime(t *testing.T) {
	yaml := baseIn(t.TempDir(), "", "") + standardHooks
	body := []byte(`{"event":"build.failed"}`)
	now := time.Now()
	h := signStandard("msg_1", now, body)

	before := newEnv(t, yaml)
	first := before.post("std", body, h)
	expect(t, first, http.StatusAccepted, "")
	if first.str("request_id") != "webhook:std:msg_1" {
		t.Fatalf("request id %q", first.str("request_id"))
	}
	again := before.post("std", body, h)
	if again.str("message_id") != first.str("message_id") {
		t.Fatalf("the replay got %v; the first %v", again.body, first.body)
	}
	// Another id with the captured signature does not verify.
	swapped := signStandard("msg_1", now, body)
	swapped["Webhook-Id"] = "msg_2"
	r := before.post("std", body, swapped)
	expect(t, r, http.StatusUnauthorized, "WEBHOOK_BAD_SIGNATURE")
	// Outside the replay window, however well signed.
	r = before.post("std", body, signStandard("msg_3", now.Add(-10*time.Minute), body))
	expect(t, r, http.StatusUnauthorized, "WEBHOOK_BAD_SIGNATURE")
	if r.str("reason") != "webhook/stale" {
		t.Fatalf("a stale delivery refused with %v", r.body)
	}
	// A GitHub-style signature is not this scheme's.
	expect(t, before.signed("std", body, nil), http.StatusUnauthorized, "WEBHOOK_BAD_SIGNATURE")

	waitUntil(t, "the delivery's session closed", func() bool {
		_, open := before.h.Sessions().Get(first.str("session"))
		return !open
	})
	before.srv.Close()
	if err := before.hk.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if err := before.h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}

	// After a restart, the sender's retry (same id, a new timestamp and
	// signature) runs nothing.
	after := newEnv(t, yaml)
	retry := after.post("std", body, signStandard("msg_1", time.Now(), body))
	expect(t, retry, http.StatusAccepted, "")
	if retry.str("message_id") != first.str("message_id") || retry.str("session") != first.str("session") {
		t.Fatalf("after a restart the retry got %v; the first %v", retry.body, first.body)
	}
	waitUntil(t, "the session closed again", func() bool {
		_, open := after.h.Sessions().Get(first.str("session"))
		return !open
	})
	for _, s := range after.persisted() {
		if s.ID == first.str("session") && s.Turns != 1 {
			t.Fatalf("the delivery's session has %d turns; want 1", s.Turns)
		}
	}
}
