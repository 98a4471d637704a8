package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
)

// The Standard Webhooks scheme (standardwebhooks.com): the sender signs
// "<webhook-id>.<webhook-timestamp>.<body>", so the delivery id and the
// time are covered by the signature, unlike GitHub's scheme. The id is
// then the dedup key, and the timestamp bounds how long a captured delivery
// can be replayed at all.
const (
	headerID        = "Webhook-Id"
	headerTimestamp = "Webhook-Timestamp"
	headerSignature = "Webhook-Signature"
	// replayWindow is how far a delivery's timestamp may be from dsh's
	// clock, either way: the spec's recommended tolerance.
	replayWindow = 5 * time.Minute
)

// ReasonStale goes with BadSignature when a Standard Webhooks delivery's
// timestamp is outside the replay window.
const ReasonStale = "webhook/stale"

// standardSecret is the HMAC key of a Standard Webhooks secret: the
// base64 after "whsec_", or the secret as is when it has no such prefix.
func standardSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return []byte(secret), nil
	}
	return base64.StdEncoding.DecodeString(b64)
}

// verifyStandard checks a Standard Webhooks delivery and returns its
// signed id. now is dsh's clock.
func verifyStandard(secret, body []byte, h http.Header, now time.Time) (string, error) {
	id, ts, sigs := h.Get(headerID), h.Get(headerTimestamp), h.Get(headerSignature)
	if id == "" || ts == "" || sigs == "" {
		return "", errs.New(BadSignature, fmt.Sprintf(
			"the delivery lacks %s, %s or %s; a webhook with scheme standard takes Standard Webhooks deliveries only", headerID, headerTimestamp, headerSignature)).WithReason(ReasonMissingSignature)
	}
	if len(id) > maxDeliveryID || !printable(id) {
		return "", errs.New(BadSignature, fmt.Sprintf("the %s header is not 1-%d printable characters", headerID, maxDeliveryID)).WithReason(ReasonBadSignature)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", errs.New(BadSignature, fmt.Sprintf("the %s header %q is not Unix seconds", headerTimestamp, ts)).WithReason(ReasonBadSignature)
	}
	if d := now.Sub(time.Unix(secs, 0)); d > replayWindow || d < -replayWindow {
		return "", errs.New(BadSignature, fmt.Sprintf(
			"the delivery was signed at %s, %s from this server's clock; deliveries older or newer than %s are refused as replays (check both clocks)",
			time.Unix(secs, 0).UTC().Format(time.RFC3339), d.Round(time.Second), replayWindow)).WithReason(ReasonStale)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, b64, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return id, nil
		}
	}
	return "", errs.New(BadSignature, fmt.Sprintf(
		"no v1 signature in %s matches; check that the sender and dsh use the same secret (whsec_… as the sender shows it) and that the body is signed as sent", headerSignature)).WithReason(ReasonBadSignature)
}

// maxDeliveryID bounds a sender's delivery id.
const maxDeliveryID = 128

func printable(s string) bool {
	for _, c := range s {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}
