package cluster

import (
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/nats-io/nats.go/jetstream"
)

// A prompt the owner accepted is in its agent's inbox, in memory, until
// its turn records it. So that one queued behind a running turn outlives
// the owner, the owner also stores it, before answering, in the queue
// bucket; a host that resumes the session after its owner died delivers
// what that bucket holds for it again, in the order it was accepted, with
// the same request ids: a message the log already records (delivered,
// merged or dropped) is not delivered twice — the agent controller answers
// a retry from the log — and the others run on the new owner. Prompts
// without a request id cannot be told apart from a second send, so they
// are not stored.
//
// An entry is deleted once its message is durable in the log (checked as
// the next prompts for the session arrive) or redelivered; the bucket's
// TTL drops what neither removed.

// QueueBucket is the key-value bucket of the prompts accepted by the
// owners of the sessions of stream.
func QueueBucket(stream string) string { return stream + "_QUEUE" }

// queueTTL bounds how long an accepted prompt waits in the queue bucket
// for its turn: a prompt queued longer behind a running turn is not run
// again if its host dies.
const queueTTL = 24 * time.Hour

// queued is an entry of the queue bucket: the prompt as it was accepted.
type queued struct {
	Mode      sessions.Mode   `json:"mode,omitempty"`
	RequestID string          `json:"request_id"`
	Content   string          `json:"content,omitempty"`
	Parts     []part          `json:"parts,omitempty"`
	Source    sessions.Source `json:"source"`
	Accepted  time.Time       `json:"accepted"`
	// Born is the stream sequence of the first message of the session's
	// log when the prompt was accepted: a session deleted and opened again
	// under the same id starts elsewhere, and is not given the prompts of
	// the one before.
	Born uint64 `json:"born"`
}

// queueKeys are the entries this host stored for its open sessions and has
// not yet seen durable: session id → its pending entries.
type queueKeys struct {
	mu sync.Mutex
	m  map[string]*pendingKeys
}

// pendingKeys are one session's entries not yet seen durable.
type pendingKeys struct {
	keys map[string]string // request id → key
	// durable is the log's durable sequence at the last look; added are
	// the request ids noted since. Only a log made durable further can
	// turn the others' outcomes durable: an outcome recorded later has a
	// later sequence. So a look while the log's durable end stays put (a
	// turn that runs while prompts queue behind it) checks only added,
	// not every prompt queued so far.
	durable int64
	added   []string
}

func hashToken(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:12])
}

// queueKey names request rid of session id; both hashed, as neither need
// be a valid key token.
func queueKey(id, rid string) string { return hashToken(id) + "." + hashToken(rid) }

// openQueue opens, or creates, the queue bucket.
func (h *Host) openQueue(ctx stdctx.Context, js jetstream.JetStream) error {
	var err error
	h.queue, err = natsplugin.Ensure(ctx, h.o.ConnectTimeout, func(ctx stdctx.Context) (jetstream.KeyValue, error) {
		return natsplugin.BindOrCreateKV(ctx, js, jetstream.KeyValueConfig{
			Bucket:      QueueBucket(h.o.Stream),
			Description: "dsh accepted prompts not yet recorded in their session's log",
			TTL:         queueTTL,
			Replicas:    h.o.Replicas,
			Storage:     jetstream.FileStorage,
		})
	})
	if err != nil {
		return errs.Wrap(Unreachable, err, fmt.Sprintf(
			"cluster: cannot create or update the queue bucket %q on %s; is JetStream enabled (nats-server -js), and do all hosts use the same replicas?",
			QueueBucket(h.o.Stream), h.o.URL))
	}
	return nil
}

// enqueue stores req, just accepted by ss, until its message is durable in
// the log; entries of earlier prompts that are durable by now go. A store
// that fails leaves the prompt as durable as it was without this bucket:
// it is logged, and the prompt stays accepted.
func (h *Host) enqueue(ctx stdctx.Context, ss *sessions.Session, req request) {
	if req.RequestID == "" {
		return
	}
	ctx, cancel := stdctx.WithTimeout(ctx, h.o.ConnectTimeout)
	defer cancel()
	if done := h.queued.recorded(ss); len(done) > 0 {
		// Off the prompt's path: an entry left behind only costs a
		// redelivery the log answers.
		h.spawn(func() {
			dctx, dcancel := stdctx.WithTimeout(h.ctx, h.o.ConnectTimeout)
			defer dcancel()
			for _, key := range done {
				if err := h.queue.Delete(dctx, key); err != nil {
					h.log.Debug("cluster: cannot delete a recorded prompt from the queue bucket", "session", ss.ID(), "error", err)
				}
			}
		})
	}
	b, ok := ss.Log().Lease().(interface{ Born() uint64 })
	if !ok {
		return // not kept by session.nats: nothing to resume it elsewhere
	}
	born := b.Born()
	data, _ := json.Marshal(queued{Mode: req.Mode, RequestID: req.RequestID, Content: req.Content, Parts: req.Parts,
		Source: req.Source, Accepted: time.Now().UTC(), Born: born})
	key := queueKey(ss.ID(), req.RequestID)
	if _, err := h.queue.Put(ctx, key, data); err != nil {
		h.log.Warn("cluster: cannot store an accepted prompt in the queue bucket; it is lost if this host dies before its turn", "session", ss.ID(), "request_id", req.RequestID, "error", err)
		return
	}
	h.queued.add(ss.ID(), req.RequestID, key)
}

// add notes an entry stored for session id.
func (q *queueKeys) add(id, rid, key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = map[string]*pendingKeys{}
	}
	p := q.m[id]
	if p == nil {
		p = &pendingKeys{keys: map[string]string{}}
		q.m[id] = p
	}
	p.keys[rid] = key
	p.added = append(p.added, rid)
}

// recorded takes out the entries of ss whose outcome is durable in its log.
func (q *queueKeys) recorded(ss *sessions.Session) []string {
	s := ss.Log()
	durable := s.Durable()
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.m[ss.ID()]
	if p == nil {
		return nil
	}
	var done []string
	check := func(rid string) {
		key, ok := p.keys[rid]
		if !ok {
			return
		}
		if ev, ok := s.Outcome(rid); ok && ev.Seq <= durable {
			done = append(done, key)
			delete(p.keys, rid)
		}
	}
	if durable != p.durable {
		for rid := range p.keys {
			check(rid)
		}
	} else {
		for _, rid := range p.added {
			check(rid)
		}
	}
	p.durable, p.added = durable, p.added[:0]
	return done
}

// redeliver delivers again, through ss just resumed here, the prompts its
// previous owner accepted and stored, oldest first, and deletes them.
func (h *Host) redeliver(ctx stdctx.Context, ss *sessions.Session) {
	entries, err := h.queuedFor(ctx, ss.ID())
	if err != nil {
		// The view may miss an entry stored a moment ago; what it holds
		// is delivered all the same.
		h.log.Warn("cluster: cannot make sure every prompt queued for a resumed session is known here", "session", ss.ID(), "error", err)
	}
	if len(entries) == 0 {
		return // the usual case: no request to the server
	}
	born, berr := h.born(ctx, ss)
	for _, e := range entries {
		var q queued
		if err := json.Unmarshal(e.Value(), &q); err != nil {
			h.log.Warn("cluster: a queued prompt is not a queue entry; dropped", "session", ss.ID(), "key", e.Key(), "error", err)
		} else if berr != nil || q.Born != born {
			// Accepted for an earlier session of this id (deleted since),
			// or the log's start cannot be read: not delivered.
			h.log.Debug("cluster: a queued prompt of an earlier session under this id was dropped", "session", ss.ID(), "request_id", q.RequestID)
		} else if _, recorded := ss.Log().Outcome(q.RequestID); recorded {
			// Its outcome is in the log (the usual case: the previous
			// owner ran it): nothing to deliver, not even to admission.
		} else {
			pr := sessions.PromptRequest{RequestID: q.RequestID, Content: q.Content, Source: q.Source}
			for _, p := range q.Parts {
				pt := p.Part
				pt.Data = p.Data
				pr.Parts = append(pr.Parts, pt)
			}
			var derr error
			if q.Mode == sessions.ModeSteer {
				_, derr = ss.Steer(ctx, pr)
			} else {
				_, derr = ss.Prompt(ctx, pr)
			}
			if derr != nil {
				h.log.Info("cluster: a prompt queued on the session's previous owner was not delivered again", "session", ss.ID(), "request_id", q.RequestID, "error", derr)
			} else {
				h.queued.add(ss.ID(), q.RequestID, e.Key())
				continue // deleted once durable, like one accepted here
			}
		}
		if err := h.queue.Delete(ctx, e.Key()); err != nil {
			h.log.Debug("cluster: cannot delete a queued prompt", "session", ss.ID(), "error", err)
		}
	}
}

// born is the stream sequence of the first message of session id's log.
func (h *Host) born(ctx stdctx.Context, ss *sessions.Session) (uint64, error) {
	// The writer read it when it took the lease: no request, and none
	// that scans the stream from its start for the subject's first message.
	if b, ok := ss.Log().Lease().(interface{ Born() uint64 }); ok && b.Born() != 0 {
		return b.Born(), nil
	}
	m, err := h.leader.First(ctx, natsplugin.Subject(h.o.SubjectPrefix, ss.ID()))
	if err != nil {
		return 0, err
	}
	return m.Sequence, nil
}
