package webhook

import (
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/atomicfile"
	"github.com/dsh-go/dsh/serve/unattended"
	"github.com/dsh-go/dsh/services/sessions"
)

// SpoolFailed: the delivery could not be recorded in the spool before its
// answer, so it is not accepted (503 with Retry-After: the sender
// redelivers).
const SpoolFailed errs.Code = "WEBHOOK_SPOOL_FAILED"

// The spool keeps each accepted delivery until its request has an outcome
// in its session's log. A 202 tells the sender the delivery is taken, and
// a sender does not redeliver what was taken; but the agent's inbox is in
// memory, and a delivery queued there behind a running turn (or in the
// moment before its turn's first checkpoint) is in no log yet. A crash then
// would lose a delivery that was answered 202. The spool is written and
// synced before the answer; at the next start every delivery still in it
// is delivered again under its request id, which the session answers from
// its log when it took the delivery before the crash, so nothing runs
// twice and nothing accepted is lost.

// spooled is one accepted delivery, as kept in the spool.
type spooled struct {
	Version   int    `json:"version"`
	Hook      string `json:"hook"`
	RequestID string `json:"request_id"`
	// Own is the delivery's own session (a webhook without session:).
	Own      string    `json:"own,omitempty"`
	Prompt   string    `json:"prompt"`
	Accepted time.Time `json:"accepted"`
}

type spool struct{ dir string }

// openSpool makes the spool directory (0700); an empty dir is no spool.
func openSpool(dir string) (*spool, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errs.Wrap(SpoolFailed, err, fmt.Sprintf("cannot create the webhooks' spool %s; check its parent's permissions or set serve.state_dir", dir))
	}
	return &spool{dir: dir}, nil
}

// path is the file of request id: named by a digest, since request ids
// hold characters file names should not.
func (s *spool) path(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:16])+".json")
}

// put stores d durably: the file synced, renamed into place, and the
// directory synced, so the record outlives a crash right after the 202.
func (s *spool) put(d spooled) error {
	d.Version = 1
	raw, err := json.Marshal(d)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encoding a spooled delivery")
	}
	if err := atomicfile.Write(s.path(d.RequestID), raw, 0o600, nil); err != nil {
		return errs.Wrap(SpoolFailed, err, fmt.Sprintf("cannot record the delivery in the webhooks' spool %s; redeliver later", s.dir))
	}
	dir, err := os.Open(s.dir)
	if err == nil {
		err = errors.Join(dir.Sync(), dir.Close())
	}
	if err != nil {
		return errs.Wrap(SpoolFailed, err, fmt.Sprintf("cannot sync the webhooks' spool %s; redeliver later", s.dir))
	}
	return nil
}

// remove forgets requestID: its outcome is in the log. Not synced: a
// record that comes back after a crash is delivered again and answered
// from the log.
func (s *spool) remove(requestID string) error {
	if err := os.Remove(s.path(requestID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// list returns the spooled deliveries, oldest first, so a webhook's
// session takes them again in the order it accepted them. Files that do
// not read as a record (a temporary file of a write cut short) are left
// out, and returned as bad.
func (s *spool) list() (ds []spooled, bad []string, err error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(s.dir, name))
		var d spooled
		if err == nil {
			err = json.Unmarshal(raw, &d)
		}
		if err != nil || d.Version != 1 || d.RequestID == "" {
			bad = append(bad, name)
			continue
		}
		ds = append(ds, d)
	}
	slices.SortStableFunc(ds, func(a, b spooled) int { return a.Accepted.Compare(b.Accepted) })
	return ds, bad, nil
}

// unspool forgets a delivery that was not accepted.
func (h *Handler) unspool(requestID string) {
	if h.spool == nil {
		return
	}
	if err := h.spool.remove(requestID); err != nil {
		h.log.Warn("a delivery that was not accepted stays in the webhooks' spool; the next start delivers it again", "request_id", requestID, "error", err)
	}
}

// settle removes an accepted delivery from the spool once its session is
// idle again and the log holds its outcome. One that has none by then (a
// store that failed to write) stays, for the next start.
func (h *Handler) settle(d unattended.Delivery, requestID string) {
	if h.spool == nil {
		return
	}
	h.settling.Add(1)
	go func() {
		defer h.settling.Done()
		<-d.Done
		if !d.Recorded() {
			h.log.Warn("an accepted delivery has no outcome in its session's log yet; it stays in the webhooks' spool and the next start delivers it again",
				"session", d.Session, "request_id", requestID)
			return
		}
		h.unspool(requestID)
	}()
}

// Replay delivers again, in the background, every delivery the spool kept
// from before a crash: a session that took it answers from its log and
// nothing runs twice; one that did not (the delivery waited in an inbox)
// takes it now. Close waits for the replay.
func (h *Handler) Replay() {
	if h.spool == nil {
		return
	}
	ds, bad, err := h.spool.list()
	if err != nil {
		h.log.Error("cannot read the webhooks' spool; deliveries accepted before a crash are not delivered again", "dir", h.spool.dir, "error", err)
		return
	}
	for _, name := range bad {
		h.log.Warn("a file of the webhooks' spool is not a delivery; it is left as is", "file", filepath.Join(h.spool.dir, name))
	}
	if len(ds) == 0 {
		return
	}
	h.settling.Add(1)
	go func() {
		defer h.settling.Done()
		for _, d := range ds {
			// A session the crashed process held may stay held a while
			// (session.nats keeps its lease until lease_ttl runs out):
			// try again until it is free or the handler closes.
			for wait := replayBackoff; h.replay(d); wait = min(2*wait, maxReplayBackoff) {
				select {
				case <-h.closing:
					return
				case <-time.After(wait):
				}
			}
		}
	}()
}

// replayBackoff and maxReplayBackoff space the tries of a spooled delivery
// whose session cannot take it yet.
const (
	replayBackoff    = 250 * time.Millisecond
	maxReplayBackoff = 10 * time.Second
)

// replay delivers sp again; it reports whether to try again later (the
// failure named no outcome: the session is held elsewhere, say).
func (h *Handler) replay(sp spooled) (again bool) {
	hk, ok := h.hooks[sp.Hook]
	if !ok {
		h.log.Error("a delivery accepted before a crash names a webhook no longer configured; it stays in the spool",
			"webhook", sp.Hook, "request_id", sp.RequestID, "file", h.spool.path(sp.RequestID))
		return false
	}
	// A redelivery of the same request arriving meanwhile waits for this
	// one, or this one for it.
	f, owner := h.seen.claim(sp.RequestID)
	if !owner {
		<-f.done
		return false
	}
	resp, accepted := accepted{}, false
	defer func() { h.seen.finish(sp.RequestID, f, resp, accepted) }()
	target := hk.target
	if target.Session == "" {
		target.Own = sp.Own
	}
	d, err := h.runner.Deliver(stdctx.Background(), target, sessions.PromptRequest{RequestID: sp.RequestID, Content: sp.Prompt})
	if err != nil {
		if sessions.FateOf(err) != "" {
			// Refused or dropped: that is its recorded outcome.
			h.log.Warn("a delivery accepted before a crash was not delivered again", "webhook", sp.Hook, "request_id", sp.RequestID,
				"outcome", sessions.FateOf(err), "code", errs.CodeOf(err), "error", err)
			h.unspool(sp.RequestID)
			return false
		}
		h.log.Warn("a delivery accepted before a crash could not be delivered again yet; trying again (it stays in the spool)",
			"webhook", sp.Hook, "request_id", sp.RequestID, "code", errs.CodeOf(err), "error", err)
		return true
	}
	resp, accepted = newAccepted(d, sp.RequestID), true
	h.log.Info("a delivery accepted before a crash was delivered again", "webhook", sp.Hook, "request_id", sp.RequestID, "session", d.Session, "message_id", d.MessageID)
	h.settle(d, sp.RequestID)
	return false
}
