package nats

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// writer owns one session's subject for this process: it holds the
// session's lease and the events waiting for their checkpoint. It is the
// session's session.Lease, so writes are keyed by the writer that owns the
// session, never by its id.
type writer struct {
	store   *store
	id      string
	subject string

	// io serializes the publishes of the session; never held with mu.
	io sync.Mutex

	mu      sync.Mutex
	agent   string
	tenant  string
	lease   *lease // nil for a writer that never got one (broken)
	born    uint64 // see Born
	pending []session.Event
	// last is the stream sequence of the last message of the subject as
	// this writer knows it; every publish expects it, so a message someone
	// else wrote in between refuses this writer's next one.
	last     uint64
	released bool
	// broken is why this writer may not write: it could not take the
	// lease, or another writer appended to its subject.
	broken error

	// entry is the session's index entry as of last, when known: a
	// writer that took over a log whose entry lags reads the log once
	// before it indexes (index.go). dirty: entry changed since its put.
	entry        indexEntry
	known, dirty bool
	index        indexer
	cat          catalogMark // pages.go
}

var _ session.Holder = (*writer)(nil)

// Hold tells whether this writer still holds its session; see
// session.Holder. A lease lost fences the writer as a write would.
func (wr *writer) Hold(ctx stdctx.Context) error { return wr.check(ctx, wr.lease.hold) }

// Recheck is Hold without trusting a recent renewal: it renews the lease
// now, which fails if the entry is no longer this writer's. A cluster host
// calls it when it sees another host take the session's lease — which
// happens only once this one's ran out — so that the writer is fenced
// before the copy is closed and its last flush could land after the new
// owner read the log's end.
func (wr *writer) Recheck(ctx stdctx.Context) error { return wr.check(ctx, wr.lease.refresh) }

// check fails when the writer is unusable, else asks the lease with ask
// (hold, or refresh) within the store's timeout.
func (wr *writer) check(ctx stdctx.Context, ask func(stdctx.Context) error) error {
	wr.mu.Lock()
	err := wr.unusable()
	wr.mu.Unlock()
	if err != nil {
		return err
	}
	hctx, cancel := wr.store.timeout(ctx)
	defer cancel()
	if err := ask(hctx); err != nil {
		return wr.unleased(err)
	}
	return nil
}

func (wr *writer) add(agent, tenant string, e session.Event) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.agent, wr.tenant = agent, tenant
	if wr.released {
		wr.store.log.Error("dropped a session event appended after the session was closed",
			"session", wr.id, "seq", e.Seq, "type", e.Type)
		return
	}
	wr.pending = append(wr.pending, e)
}

// write publishes the pending events up to seq and waits for the server
// to acknowledge them: the ack is the durability point. A step's events go
// as one atomic batch (batch.go) — pipelined, one ack to wait for, stored
// all or not at all — where the stream allows it, else one message each,
// each awaited. An event stays pending until acked, so a failed publish is
// retried at the next checkpoint; the message ids make the server drop a
// retry of messages it stored but whose ack was lost.
func (wr *writer) write(ctx stdctx.Context, seq int64) error {
	wr.io.Lock()
	defer wr.io.Unlock()
	wr.mu.Lock()
	if err := wr.unusable(); err != nil {
		wr.mu.Unlock()
		return err
	}
	n := 0
	for n < len(wr.pending) && wr.pending[n].Seq <= seq {
		n++
	}
	batch := wr.pending[:n:n]
	who, last, token := author{wr.agent, wr.tenant}, wr.last, wr.lease.token
	wr.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	// The end lock read is no longer the log's.
	wr.store.ends.Delete(wr.id)
	hctx, cancel := wr.store.timeout(ctx)
	err := wr.lease.hold(hctx)
	cancel()
	if err != nil {
		return wr.unleased(err)
	}
	out := make([]outgoing, len(batch))
	for i, e := range batch {
		data, err := json.Marshal(e)
		if err != nil {
			return errs.Wrap(session.FlushFailed, err, fmt.Sprintf("session.nats: event %d of session %q cannot be written as JSON", e.Seq, wr.id))
		}
		out[i] = outgoing{event: e, data: data, id: token + ":" + strconv.FormatInt(e.Seq, 10)}
	}
	for done := 0; done < len(out); {
		chunk := out[done:min(len(out), done+maxBatch)]
		var stored int
		var err error
		if len(chunk) > 1 && wr.store.atomic.Load() {
			stored, last, err = wr.publishAtomic(ctx, chunk, who, last)
		} else {
			stored, last, err = wr.publishEach(ctx, chunk, who, last)
		}
		wr.acked(who, chunk[:stored], last, done+stored == len(out))
		done += stored
		if err != nil {
			return wr.failed(done, err, out[done].event.Seq)
		}
	}
	return nil
}

// outgoing is a pending event as it is published: its JSON and message id.
type outgoing struct {
	event session.Event
	data  []byte
	id    string
}

func (wr *writer) message(o outgoing, who author) *natsgo.Msg {
	m := natsgo.NewMsg(wr.subject)
	m.Data = o.data
	m.Header.Set(agentHeader, who.agent)
	if who.tenant != "" {
		// Escaped: a tenant comes from a token's claim, and a raw CR or
		// LF in a header value would end the header there.
		m.Header.Set(tenantHeader, url.QueryEscape(who.tenant))
	}
	return m
}

// acked takes the events of stored off the pending ones, the last of them
// at stream sequence last.
func (wr *writer) acked(who author, stored []outgoing, last uint64, end bool) {
	if len(stored) == 0 {
		return
	}
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.last = last
	if !wr.released {
		wr.pending = wr.pending[len(stored):]
	}
	if wr.known {
		for _, o := range stored {
			wr.entry.note(who, o.event, len(o.data), last)
		}
	}
	if end {
		wr.reindex()
	}
}

// publishEach publishes out one message at a time, each expecting the one
// before it as its subject's last; it returns how many were stored and the
// sequence of the last of them.
func (wr *writer) publishEach(ctx stdctx.Context, out []outgoing, who author, last uint64) (int, uint64, error) {
	for i := 0; i < len(out); {
		// connect_timeout bounds each publish, not the batch: a long
		// batch is no slower server.
		pctx, cancel := wr.store.timeout(ctx)
		ack, err := wr.publish(pctx, wr.message(out[i], who), last, out[i].id)
		cancel()
		if err == nil {
			i, last = i+1, ack.Sequence
			continue
		}
		if !wrongLast(err) {
			return i, last, err
		}
		// An earlier try of this very message may have been stored with
		// its ack lost; the server checks the expected sequence before
		// the duplicate id, so the retry is refused as if another writer
		// had appended.
		n, seq, lerr := wr.landedOf(ctx, out[i:])
		if lerr != nil {
			// Cannot tell whether it landed: retried at the next
			// checkpoint rather than taken for another writer.
			return i, last, lerr
		}
		if n == 0 {
			return i, last, err
		}
		i, last = i+n, seq
	}
	return len(out), last, nil
}

// busyRetry is the pause before publishing again what a cluster refused
// for a moment.
const busyRetry = 20 * time.Millisecond

// publish sends one message that expects last as its subject's last
// sequence, riding out, until ctx ends, what a cluster refuses only for a
// moment: no stream leader while one is elected, and the subject counted
// in flight. The latter is JetStream's "wrong last sequence" of code 10164
// (not 10071, which means another writer appended): a stream leader may
// ack an append before it stops counting it in flight, so the next append
// of the same writer can be refused although the sequence it expects is
// right.
func (wr *writer) publish(ctx stdctx.Context, m *natsgo.Msg, last uint64, msgID string) (*jetstream.PubAck, error) {
	for {
		ack, err := wr.store.js.PublishMsg(ctx, m,
			jetstream.WithExpectLastSequencePerSubject(last),
			jetstream.WithMsgID(msgID),
			// As many as fit in connect_timeout, which ctx ends anyway.
			jetstream.WithRetryAttempts(int(wr.store.cfg.ConnectTimeout/busyRetry)+1), jetstream.WithRetryWait(busyRetry))
		if !inFlight(err) {
			return ack, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(busyRetry):
		}
	}
}

// inFlight reports JetStream's momentary refusal of code 10164 (see
// publish).
func inFlight(err error) bool {
	var je jetstream.JetStreamError
	return errors.As(err, &je) && je.APIError() != nil && je.APIError().ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// wrongLast reports JetStream's refusal of a publish whose expected last
// sequence is not the subject's.
func wrongLast(err error) bool {
	var je jetstream.JetStreamError
	return errors.As(err, &je) && je.APIError() != nil && je.APIError().ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// landedOf tells how many of out, from the first, this writer already
// stored — a try whose ack was lost — and the stream sequence of the last
// of them: those up to the subject's last message when that message is one
// of out. Each of out expects the one before it, so if one is the
// subject's last, those before it are stored too and nobody appended
// after.
func (wr *writer) landedOf(ctx stdctx.Context, out []outgoing) (int, uint64, error) {
	lctx, cancel := wr.store.timeout(ctx)
	defer cancel()
	m, err := wr.store.leader.Last(lctx, wr.subject)
	if err != nil {
		return 0, 0, err
	}
	id := m.Header.Get(jetstream.MsgIDHeader)
	for i, o := range out {
		if o.id == id {
			return i + 1, m.Sequence, nil
		}
	}
	return 0, 0, nil
}

// failed turns a refused publish into the writer's error; a message
// another writer appended first fences this writer for good.
func (wr *writer) failed(done int, err error, seq int64) error {
	var je jetstream.JetStreamError
	if errors.As(err, &je) && je.APIError() != nil {
		switch je.APIError().ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, errAtomicDuplicateInIt:
			// A duplicate that is not the subject's last message: this
			// writer's message was stored and another appended after it.
			fenced := errs.New(session.SessionLocked, fmt.Sprintf(
				"session.nats: another writer appended to session %q (subject %s) after this one last did; this writer stops so the two logs cannot interleave — resume the session where it is now owned",
				wr.id, wr.subject)).WithReason(session.ReasonFenced)
			wr.mu.Lock()
			wr.broken = fenced
			wr.mu.Unlock()
			return fenced
		}
	}
	return errs.Wrap(session.FlushFailed, err, fmt.Sprintf(
		"session.nats: cannot publish event %d of session %q to %s on %s (%d of the batch stored); the rest stay in memory and are published at the next checkpoint — check the NATS server",
		seq, wr.id, wr.subject, wr.store.cfg.URL, done))
}

// unleased turns a lease that could not be held into the writer's error:
// a lease that ran out fences the writer for good; a server out of reach
// is retried at the next checkpoint.
func (wr *writer) unleased(err error) error {
	if !isLost(err) {
		return errs.Wrap(session.FlushFailed, err, fmt.Sprintf(
			"session.nats: cannot renew the lease of session %q on %s, which it needs before writing: renewals failed for over two thirds of lease_ttl (%s); the events stay in memory and are written at the next checkpoint — check the NATS server",
			wr.id, wr.store.cfg.URL, wr.store.cfg.LeaseTTL))
	}
	fenced := errs.New(session.SessionLocked, fmt.Sprintf(
		"session.nats: the lease of session %q ran out — this host could not renew it for lease_ttl (%s) — and another host may own the session now; this writer stops so two cannot write it — resume the session where it is now owned",
		wr.id, wr.store.cfg.LeaseTTL)).WithReason(session.ReasonFenced)
	wr.mu.Lock()
	wr.broken = fenced
	wr.mu.Unlock()
	return fenced
}

// unusable says why the writer may not write; the caller holds mu.
func (wr *writer) unusable() error {
	switch {
	case wr.broken != nil:
		return wr.broken
	case wr.released:
		return errs.New(session.SessionLocked, fmt.Sprintf(
			"session.nats: the writer of session %q was released; what it still had is not written, so it cannot mix with the next owner's log", wr.id)).WithReason(session.ReasonFenced)
	}
	return nil
}

// Release lets the session go: the lease is given back and nothing more is
// written through this writer.
func (wr *writer) Release() error {
	wr.io.Lock() // a publish in flight finishes while the lease is held
	defer wr.io.Unlock()
	wr.mu.Lock()
	if wr.released {
		wr.mu.Unlock()
		return nil
	}
	wr.released = true
	if n := len(wr.pending); n > 0 && wr.broken == nil {
		wr.store.log.Error("session closed with events that were never published", "session", wr.id, "events", n)
	}
	wr.pending = nil
	l := wr.lease
	wr.mu.Unlock()
	// The entry of the last checkpoint lands before the lease is given
	// back, so the next owner finds it current; now, not indexEvery
	// after the put before it.
	wr.indexNow()
	wr.index.done.Wait()
	wr.unmarkCatalog()
	wr.store.ends.Delete(wr.id)
	wr.store.writers.Forget(wr.id, wr)
	if l == nil {
		return nil
	}
	return l.release()
}
