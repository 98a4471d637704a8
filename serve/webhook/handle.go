package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/sessions"
)

// deliveryHeaders carry the sender's id of a delivery, kept across its
// redeliveries: GitHub's, then the usual generic one.
var deliveryHeaders = []string{"X-GitHub-Delivery", "X-Request-Id"}

// ServeHTTP serves POST /hooks/{name}; mounted without StripPrefix, or
// with it (the name is then the whole path).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/hooks/"), "/")
	hk, ok := h.hooks[name]
	if !ok {
		writeError(w, errs.New(NotFound, fmt.Sprintf("no webhook %q is configured; add it under serve.webhooks, or check the URL (POST /hooks/<name>)", name)), "")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, errs.New(MethodNotAllowed, fmt.Sprintf("webhook %q takes POST only, not %s", name, r.Method)), "")
		return
	}
	body, err := readBody(r, hk)
	if err != nil {
		writeError(w, err, "")
		return
	}
	signature := r.Header.Get(hk.header)
	if err := verify(hk.secret, body, hk.header, signature); err != nil {
		h.log.Warn("webhook delivery refused: bad signature", "webhook", name, "reason", errs.ReasonOf(err), "remote", r.RemoteAddr)
		writeError(w, err, "")
		return
	}
	requestID := requestIDOf(name, r.Header, body, signature)
	for {
		f, owner := h.seen.claim(requestID)
		if owner {
			h.deliver(w, r, hk, body, requestID, f)
			return
		}
		select {
		case <-f.done:
		case <-r.Context().Done():
			writeError(w, errs.Wrap(ShuttingDown, r.Context().Err(), "the request ended while the same delivery was in progress"), requestID)
			return
		}
		if f.ok {
			h.log.Info("webhook redelivery answered as the first", "webhook", name, "request_id", requestID)
			writeJSON(w, http.StatusAccepted, f.resp)
			return
		}
		// The first attempt failed and was forgotten: try again.
	}
}

// deliver renders and delivers one delivery the caller claimed.
func (h *Handler) deliver(w http.ResponseWriter, r *http.Request, hk *hook, body []byte, requestID string, f *flight) {
	resp, ok := accepted{}, false
	defer func() { h.seen.finish(requestID, f, resp, ok) }()
	prompt, err := hk.render(body, r.Header)
	if err != nil {
		writeError(w, err, requestID)
		return
	}
	d, err := h.runner.Deliver(r.Context(), hk.target, sessions.PromptRequest{RequestID: requestID, Content: prompt})
	if err != nil {
		h.log.Warn("webhook delivery not delivered", "webhook", hk.name, "request_id", requestID, "code", errs.CodeOf(err), "reason", errs.ReasonOf(err), "error", err)
		writeError(w, err, requestID)
		return
	}
	resp, ok = accepted{Session: d.Session, MessageID: d.MessageID, RequestID: requestID}, true
	h.log.Info("webhook delivered", "webhook", hk.name, "request_id", requestID, "session", d.Session, "message_id", d.MessageID)
	writeJSON(w, http.StatusAccepted, resp)
}

// readBody reads the body up to the webhook's limit.
func readBody(r *http.Request, hk *hook) ([]byte, error) {
	tooLarge := func() error {
		return errs.New(BodyTooLarge, fmt.Sprintf("webhook %q takes bodies up to %d bytes; raise serve.webhooks.%s.max_body_bytes if the sender needs more", hk.name, hk.maxBody, hk.name))
	}
	if r.ContentLength > hk.maxBody {
		return nil, tooLarge()
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, hk.maxBody+1))
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("webhook %q: reading the body failed", hk.name))
	}
	if int64(len(body)) > hk.maxBody {
		return nil, tooLarge()
	}
	return body, nil
}

// maxDeliveryID bounds a sender's delivery id taken as is.
const maxDeliveryID = 128

// requestIDOf names the delivery for deduplication: the sender's delivery
// id when it sends one, else a digest of what it sent, which a
// redelivery repeats exactly.
func requestIDOf(name string, header http.Header, body []byte, signature string) string {
	for _, k := range deliveryHeaders {
		if v := header.Get(k); v != "" && len(v) <= maxDeliveryID && printable(v) {
			return "webhook:" + name + ":" + v
		}
	}
	sum := sha256.New()
	sum.Write(body)
	sum.Write([]byte{0})
	sum.Write([]byte(signature))
	return "webhook:" + name + ":sha256-" + hex.EncodeToString(sum.Sum(nil))[:32]
}

func printable(s string) bool {
	for _, c := range s {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}
