package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// verify checks value, the signature header, against the body: it must be
// "sha256=" and the hex of HMAC-SHA256(secret, body). The comparison takes
// constant time; neither the secret nor the value ever reaches a message.
func verify(secret, body []byte, header, value string) error {
	if value == "" {
		return errs.New(BadSignature, fmt.Sprintf(
			"the delivery has no %s header; sign the raw body with HMAC-SHA256 and send sha256=<hex>", header)).WithReason(ReasonMissingSignature)
	}
	hexSum, ok := strings.CutPrefix(value, "sha256=")
	got, err := hex.DecodeString(hexSum)
	if !ok || err != nil {
		return errs.New(BadSignature, fmt.Sprintf(
			"the %s header is not sha256=<hex>; sign the raw body with HMAC-SHA256 and send sha256=<hex>", header)).WithReason(ReasonBadSignature)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return errs.New(BadSignature, fmt.Sprintf(
			"the %s signature does not match the body; check that the sender and dsh use the same secret and that the body is signed as sent", header)).WithReason(ReasonBadSignature)
	}
	return nil
}
