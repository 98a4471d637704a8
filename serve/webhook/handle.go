package webhook

import (
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/sessions"
)

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
	requestID, digest, err := hk.check(body, r.Header, h.now())
	if err != nil {
		h.log.Warn("webhook delivery refused: bad signature", "webhook", name, "reason", errs.ReasonOf(err), "remote", r.RemoteAddr)
		writeError(w, err, "")
		return
	}
	for {
		f, owner := h.seen.claim(requestID)
		if owner {
			h.deliver(w, r, hk, body, requestID, digest, f)
			return
		}
		select {
		case <-f.done:
		case <-r.Context().Done():
			writeError(w, errs.Wrap(ShuttingDown, r.Context().Err(), "the request ended while the same delivery was in progress"), requestID)
			return
		}
		if f.ok {
			if err := h.droppedSince(f.resp, hk); err != nil {
				writeError(w, err, requestID)
				return
			}
			h.log.Info("webhook redelivery answered as the first", "webhook", name, "request_id", requestID)
			writeJSON(w, http.StatusAccepted, f.resp)
			return
		}
		// The first attempt failed and was forgotten: try again.
	}
}

// droppedSince reports a remembered delivery that a cancel dropped after
// it was accepted, from the log of its session, open here or stored: the
// memory holds the first answer, the log what became of it.
func (h *Handler) droppedSince(first accepted, hk *hook) error {
	o, ok, err := h.sessions.Outcome(stdctx.Background(), first.Session, first.RequestID)
	if err != nil || !ok || o.Outcome != sessions.FateDropped {
		// Nothing to read (not stored), or not dropped.
		return nil
	}
	// The agent names the drop in the message; a closed session's is
	// the one the runner opened it with.
	agentID := hk.target.Agent + "@" + first.Session
	if in, err := h.sessions.Info(stdctx.Background(), first.Session); err == nil {
		agentID = in.AgentID
	}
	return sessions.DroppedError(agentID, o)
}

// deliver renders and delivers one delivery the caller claimed.
func (h *Handler) deliver(w http.ResponseWriter, r *http.Request, hk *hook, body []byte, requestID, digest string, f *flight) {
	resp, ok := accepted{}, false
	defer func() { h.seen.finish(requestID, f, resp, ok) }()
	prompt, err := hk.render(body, r.Header)
	if err != nil {
		writeError(w, err, requestID)
		return
	}
	target := hk.target
	if target.Session == "" {
		// The delivery's own session is named by the delivery, so the
		// session store is its durable dedup record: a redelivery after a
		// restart, or on another host, finds the session and its request
		// id there and runs nothing.
		target.Own = ownSessionID(hk.name, digest)
	}
	if h.spool != nil {
		// Recorded before the delivery can enter an inbox: from the 202
		// on, the sender counts it as taken.
		err := h.spool.put(spooled{Hook: hk.name, RequestID: requestID, Own: target.Own, Prompt: prompt, Accepted: h.now()})
		if err != nil {
			h.log.Error("webhook delivery not accepted: the spool cannot record it", "webhook", hk.name, "request_id", requestID, "error", err)
			writeError(w, err, requestID)
			return
		}
	}
	d, err := h.runner.Deliver(r.Context(), target, sessions.PromptRequest{RequestID: requestID, Content: prompt})
	if err != nil {
		// Not accepted: the sender is told so and redelivers, or its
		// refusal is the delivery's recorded outcome.
		h.unspool(requestID)
		h.log.Warn("webhook delivery not delivered", "webhook", hk.name, "request_id", requestID, "code", errs.CodeOf(err), "reason", errs.ReasonOf(err), "error", err)
		writeError(w, err, requestID)
		return
	}
	resp, ok = newAccepted(d, requestID), true
	h.settle(d, requestID)
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

// check verifies a delivery by the webhook's scheme and names it for
// deduplication by what the signature covers.
func (hk *hook) check(body []byte, h http.Header, now time.Time) (requestID, digest string, err error) {
	if hk.standard {
		id, err := verifyStandard(hk.secret, body, h, now)
		if err != nil {
			return "", "", err
		}
		// The id is signed: it names the delivery, and the sender keeps
		// it across its retries.
		sum := sha256.Sum256([]byte(id))
		return "webhook:" + hk.name + ":" + id, hex.EncodeToString(sum[:16]), nil
	}
	if err := verify(hk.secret, body, hk.header, h.Get(hk.header)); err != nil {
		return "", "", err
	}
	requestID, digest = requestIDOf(hk.name, body)
	return requestID, digest, nil
}

// requestIDOf names the delivery for deduplication by what its signature
// covers, the body: a delivery id header is not signed, so a captured
// delivery replayed under another id (or none) must still be the same
// delivery. A sender's redelivery repeats the body exactly. Two distinct
// deliveries with byte-identical bodies are therefore one delivery
// (docs/webhooks.md says so); GitHub's bodies name their event.
func requestIDOf(name string, body []byte) (requestID, digest string) {
	sum := sha256.Sum256(body)
	digest = hex.EncodeToString(sum[:16])
	return "webhook:" + name + ":sha256-" + digest, digest
}

// ownSessionID is the session of a delivery to a webhook without session:
// 8+64+1+32 characters at most, within session.MaxIDLen.
func ownSessionID(name, digest string) string { return "webhook-" + name + "-" + digest }
