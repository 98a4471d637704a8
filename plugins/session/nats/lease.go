package nats

import (
	"bytes"
	stdctx "context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/nats-io/nats.go/jetstream"
)

// LeaseRecord is the value of a lease entry: who holds the session. The
// holder's description goes into the error of the next one who asks; the
// host id tells a cluster's router where to forward the session's
// messages.
type LeaseRecord struct {
	Holder string    `json:"holder"`
	HostID string    `json:"host_id,omitempty"`
	Since  time.Time `json:"since"`
}

// LeaseBucket is the JetStream key-value bucket holding the leases of the
// sessions of stream: one key per session id.
func LeaseBucket(stream string) string { return stream + "_LEASES" }

func holderName(hostID string) string {
	if hostID != "" {
		return fmt.Sprintf("host %q (process %d)", hostID, os.Getpid())
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("process %d on host %q", os.Getpid(), host)
}

// lease is this process's entry in the lease bucket for one session. The
// bucket's TTL drops an entry nobody renews, so the lease of a host that
// died runs out; a live holder renews it every third of the TTL.
type lease struct {
	store *store
	key   string
	// token is unique to this hold; it prefixes the message ids of the
	// writes made under it.
	token string

	value []byte // the entry, as written at each renewal

	// renewing serializes the writes of the entry: two at once would
	// expect the same revision, and the loser would think the lease lost.
	renewing sync.Mutex

	mu  sync.Mutex
	rev uint64
	// sent is when the write that made rev was sent: the entry expires no
	// sooner than a TTL after it.
	sent time.Time
	// lost is set when a renewal found the entry gone or replaced: the TTL
	// ran out (this process stalled) and someone else may own the session.
	lost error

	stop chan struct{}
	done chan struct{}
}

// Lock takes session id for this process, or fails with SessionLocked
// naming the holder.
func (s *store) Lock(ctx stdctx.Context, sessionID string) (session.Lease, error) {
	wr, err := s.lock(ctx, sessionID, false)
	if err != nil {
		return nil, err
	}
	return wr, nil
}

// LockStored takes session id for a resume: like Lock, but a session with
// no log in the stream is SESSION_NOT_FOUND, and no open record is
// written for it — a resume of an id never stored must not create it.
func (s *store) LockStored(ctx stdctx.Context, sessionID string) (session.Lease, error) {
	wr, err := s.lock(ctx, sessionID, true)
	if err != nil {
		return nil, err
	}
	return wr, nil
}

// lock takes the lease of session id; with stored, a session that has no
// log yet is refused rather than created.
func (s *store) lock(ctx stdctx.Context, sessionID string, stored bool) (*writer, error) {
	subject, err := s.subject(sessionID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	if stored {
		// Nothing stored is told before the lease is taken: taking and
		// releasing it would write a release (a delete) that others read
		// as the session's close.
		if last, err := s.lastSeq(ctx, subject); err != nil {
			return nil, err
		} else if last == 0 {
			return nil, s.notFound(sessionID)
		}
	}
	l, err := s.acquire(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	// Marked before the log can change, so listings read it (pages.go).
	marker, err := s.markCatalog(ctx, sessionID)
	if err != nil {
		l.release()
		return nil, err
	}
	// Taken after the lease: every write of a previous owner that could
	// land is in, and one that lands later is refused by the expected
	// sequence, not mixed into this writer's log.
	last, err := s.lastSeq(ctx, subject)
	var born uint64
	var x indexEntry
	var current bool
	switch {
	case err == nil && last == 0 && stored:
		err = s.notFound(sessionID)
	case err == nil && last == 0:
		last, err = s.markOpen(ctx, subject, l.token)
		born = last
		// New: its open record is its log.
		x, current = indexEntry{Born: born, Last: last, Msgs: 1}, true
	case err == nil:
		// The index names the log's first message when it is current;
		// else it is asked of the stream, which scans for it.
		if x, current, _ = s.entry(ctx, sessionID); current && x.Last == last && x.Born != 0 {
			born = x.Born
		} else {
			current = false
			born, err = s.firstSeq(ctx, subject)
		}
	}
	if err != nil {
		l.release()
		return nil, err
	}
	wr := &writer{store: s, id: sessionID, subject: subject, lease: l, last: last, born: born}
	wr.entry, wr.known = x, current
	wr.cat = s.newCatalogMark(sessionID, marker, x, current)
	if last == born {
		// Indexed now, so that a listing shows it before its first prompt.
		wr.mu.Lock()
		wr.reindex()
		wr.mu.Unlock()
	}
	// Under the lease nobody else appends: the load that follows a lock
	// (a resume) reads up to this end without asking for it again.
	s.ends.Store(sessionID, last)
	s.writers.Hold(sessionID, wr)
	return wr, nil
}

func (s *store) acquire(ctx stdctx.Context, key string) (*lease, error) {
	var tok [12]byte
	rand.Read(tok[:])
	value, _ := json.Marshal(LeaseRecord{Holder: s.holder, HostID: s.cfg.HostID, Since: time.Now().UTC()})
	sent := time.Now()
	rev, err := s.leases.Create(ctx, key, value)
	for inFlight(err) && ctx.Err() == nil {
		// Right after a release the server may still count the delete in
		// flight (see publish): a moment later the create goes through.
		time.Sleep(busyRetry)
		sent = time.Now()
		rev, err = s.leases.Create(ctx, key, value)
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		who := "another host"
		if e, gerr := s.leases.Get(ctx, key); gerr == nil {
			var h LeaseRecord
			if json.Unmarshal(e.Value(), &h) == nil && h.Holder != "" {
				who = h.Holder
			}
		}
		return nil, errs.New(session.SessionLocked, fmt.Sprintf(
			"session %q is in use by %s (lease in bucket %q on %s); only one dsh may write a session: stop the other one, wait for its lease to run out (lease_ttl %s) if it died, or pick another session id",
			key, who, s.leases.Bucket(), s.cfg.URL, s.cfg.LeaseTTL)).WithReason(session.ReasonOtherProcess)
	}
	if err != nil {
		return nil, s.failed(err, fmt.Sprintf("take the lease of session %q", key))
	}
	l := &lease{store: s, key: key, token: hex.EncodeToString(tok[:]), value: value, rev: rev, sent: sent,
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.renew()
	return l, nil
}

// renew keeps the entry alive until release.
func (l *lease) renew() {
	defer close(l.done)
	t := time.NewTicker(l.store.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := l.store.timeout(stdctx.Background())
		err := l.refresh(ctx)
		cancel()
		if isLost(err) {
			// For good: the next owner's now. Writes and Hold say so.
			l.store.log.Warn("a session lease ran out while this host held it; another host may own the session now", "session", l.key)
			return
		}
		if err != nil {
			// A server briefly away is retried at the next tick; the
			// fencing of appends keeps a lost lease harmless meanwhile.
			l.store.log.Warn("cannot renew a session lease", "session", l.key, "error", err)
		}
	}
}

// refresh writes the entry again, so it lasts another TTL. Finding it gone
// or replaced means it ran out, and someone may have taken the session
// since: the lease is lost for good.
func (l *lease) refresh(ctx stdctx.Context) error {
	l.renewing.Lock()
	defer l.renewing.Unlock()
	l.mu.Lock()
	rev, lost := l.rev, l.lost
	l.mu.Unlock()
	if lost != nil {
		return lost
	}
	sent := time.Now()
	next, err := l.store.leases.Update(ctx, l.key, l.value, rev)
	if RevisionConflict(err) {
		// A renewal whose answer was lost (a timeout, a leader change) may
		// have landed: the entry is then still this lease's, at a later
		// revision. Another holder's entry, or none, has another value.
		e, gerr := l.store.leases.Get(ctx, l.key)
		switch {
		case gerr == nil && bytes.Equal(e.Value(), l.value):
			next, err = l.store.leases.Update(ctx, l.key, l.value, e.Revision())
		case gerr != nil && !errors.Is(gerr, jetstream.ErrKeyNotFound):
			// Cannot tell (the server flaps): not lost, retried at the
			// next renewal.
			err = gerr
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		l.rev, l.sent = next, sent
	} else if isLost(err) {
		l.lost = err
	}
	return err
}

// hold makes sure, before a write, that the lease is still this
// process's. The expected sequence of an append cannot tell: when the
// lease ran out while this process stalled and another took the session
// but has not written yet, the log's end is still this writer's. A lease
// renewed lately cannot have run out; an older one — renewals missed — is
// renewed first, which fails if it ran out. The write then has a third of
// the TTL at least to land.
func (l *lease) hold(ctx stdctx.Context) error {
	l.mu.Lock()
	lost, sent := l.lost, l.sent
	l.mu.Unlock()
	if lost != nil {
		return lost
	}
	if time.Since(sent) < 2*l.store.cfg.LeaseTTL/3 {
		return nil
	}
	return l.refresh(ctx)
}

// isLost says whether err is a lease found run out.
func isLost(err error) bool {
	return RevisionConflict(err) || errors.Is(err, jetstream.ErrKeyNotFound)
}

// release stops the renewals and deletes the entry, unless it is no longer
// this lease's.
func (l *lease) release() error {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	rev, lost := l.rev, l.lost
	l.mu.Unlock()
	if lost != nil {
		return nil
	}
	ctx, cancel := l.store.timeout(stdctx.Background())
	defer cancel()
	err := l.store.leases.Delete(ctx, l.key, jetstream.LastRevision(rev))
	if err != nil && !RevisionConflict(err) {
		return l.store.failed(err, fmt.Sprintf("release the lease of session %q", l.key))
	}
	return nil
}

// writerFor returns the writer that owns s: its lease, or for a session
// opened without this plugin's lease (the plugin came later, as in a
// preset) a writer that locks on first use.
func (s *store) writerFor(ss *session.Session) *writer {
	if wr, ok := ss.Lease().(*writer); ok && wr.store == s {
		return wr
	}
	return s.writers.Adopt(ss, func() *writer {
		wr, err := s.lock(stdctx.Background(), ss.ID(), false)
		if err != nil {
			s.log.Error("cannot write this session", "session", ss.ID(), "error", err)
			wr = &writer{store: s, id: ss.ID(), broken: err}
		}
		return wr
	})
}
