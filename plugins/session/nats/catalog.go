package nats

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/nats-io/nats.go/jetstream"
)

// List describes every session of the stream from the index (index.go):
// three requests — the stream's subjects with their message counts, the
// index and the leases — however many sessions are stored. A session whose
// entry is missing, or counts other messages than its subject holds, is
// described from its log, and its entry written again.
func (s *store) List(ctx stdctx.Context) ([]session.Summary, error) {
	// Listings asked for together share one read: a cluster adopting a
	// dead host's sessions claims them all at once, and each claim lists.
	l := s.listing.join(func() ([]session.Summary, error) { return s.list(ctx) })
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, s.failed(ctx.Err(), "list the sessions")
	}
	if l.err != nil {
		return nil, l.err
	}
	// Each caller gets its own copy: the session log sorts it.
	return append([]session.Summary(nil), l.list...), nil
}

// listings lets concurrent List calls share reads. A read in flight may
// have begun before a caller's write, so a caller never joins it: it
// joins the next read, which starts when that one ends and serves every
// caller that came meanwhile. However many list at once, two reads run.
type listings struct {
	mu   sync.Mutex
	cur  *listed // the read in flight
	next *listed // the read that starts when cur ends
	idle sync.WaitGroup
}

type listed struct {
	done chan struct{}
	list []session.Summary
	err  error
}

// join returns a read that begins after this call. Reads run on their own
// goroutine, so one caller leaving does not fail the others; wait waits
// for them.
func (ls *listings) join(read func() ([]session.Summary, error)) *listed {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.cur == nil {
		ls.cur = &listed{done: make(chan struct{})}
		ls.start(ls.cur, read)
		return ls.cur
	}
	if ls.next == nil {
		ls.next = &listed{done: make(chan struct{})}
	}
	return ls.next
}

// start runs l's read, then the next one if callers asked for it; the
// caller holds mu.
func (ls *listings) start(l *listed, read func() ([]session.Summary, error)) {
	ls.idle.Add(1)
	go func() {
		defer ls.idle.Done()
		l.list, l.err = read()
		ls.mu.Lock()
		ls.cur, ls.next = ls.next, nil
		if ls.cur != nil {
			ls.start(ls.cur, read)
		}
		ls.mu.Unlock()
		close(l.done)
	}()
}

func (s *store) list(ctx stdctx.Context) ([]session.Summary, error) {
	ctx = stdctx.WithoutCancel(ctx)
	counts, err := s.subjects(ctx)
	if err != nil {
		return nil, err
	}
	entries, err := s.indexed(ctx)
	if err != nil {
		return nil, err
	}
	holders, err := s.holders(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]session.Summary, 0, len(counts))
	for id, n := range counts {
		x, ok := entries[id]
		if !ok || x.Msgs != n {
			if x, ok = s.describe(ctx, id); !ok {
				_, err := s.readLog(ctx, id)
				out = append(out, session.Summary{ID: id, State: session.StateCorrupt, Error: errString(err)})
				continue
			}
			s.putEntry(ctx, id, x)
		}
		sum := x.summary(id)
		if h, ok := holders[id]; ok {
			sum.State, sum.Holder = session.StateOpen, h
		}
		out = append(out, sum)
	}
	return out, nil
}

// Find describes session id by its key: its entry, its log's last
// message (from the stream's leader) and its lease, without reading any
// other session. An entry that names another last message lags its log,
// which is read then. found is false when no log is stored under id.
func (s *store) Find(ctx stdctx.Context, id string) (sum session.Summary, found bool, err error) {
	subject, err := s.subject(id)
	if err != nil {
		return sum, false, err
	}
	tctx, cancel := s.timeout(ctx)
	last, err := s.lastSeq(tctx, subject)
	cancel()
	if err != nil {
		return sum, false, err
	}
	if last == 0 {
		return sum, false, nil
	}
	x, ok, err := s.entry(ctx, id)
	if err != nil {
		return sum, false, err
	}
	if !ok || x.Last != last {
		if x, ok = s.describe(ctx, id); !ok {
			_, err := s.readLog(ctx, id)
			return session.Summary{ID: id, State: session.StateCorrupt, Error: errString(err)}, true, nil
		}
		s.putEntry(ctx, id, x)
	}
	return s.leased(ctx, x.summary(id)), true, nil
}

func errString(err error) string {
	if err == nil {
		return "the log changed while it was read; list again"
	}
	return err.Error()
}

// subjects are the stored sessions with the number of messages of each
// log, from one request to the stream.
func (s *store) subjects(ctx stdctx.Context) (map[string]uint64, error) {
	tctx, cancel := s.timeout(ctx)
	info, err := s.stream.Info(tctx, jetstream.WithSubjectFilter(s.cfg.SubjectPrefix+".>"))
	cancel()
	if err != nil {
		return nil, s.failed(err, "list the sessions")
	}
	out := make(map[string]uint64, len(info.State.Subjects))
	for subject, n := range info.State.Subjects {
		out[strings.ReplaceAll(strings.TrimPrefix(subject, s.cfg.SubjectPrefix+"."), "%2E", ".")] = n
	}
	return out, nil
}

// indexed reads the whole index through one watch.
func (s *store) indexed(ctx stdctx.Context) (map[string]indexEntry, error) {
	out := map[string]indexEntry{}
	err := s.scan(ctx, s.index, func(e jetstream.KeyValueEntry) {
		var x indexEntry
		if json.Unmarshal(e.Value(), &x) == nil {
			out[e.Key()] = x
		}
	})
	if err != nil {
		return nil, s.failed(err, "read the session index "+IndexBucket(s.cfg.Stream))
	}
	return out, nil
}

// holders reads every lease through one watch: session id → holder.
func (s *store) holders(ctx stdctx.Context) (map[string]string, error) {
	out := map[string]string{}
	err := s.scan(ctx, s.leases, func(e jetstream.KeyValueEntry) {
		var h LeaseRecord
		json.Unmarshal(e.Value(), &h)
		out[e.Key()] = h.Holder
	})
	if err != nil {
		return nil, s.failed(err, "read the leases "+LeaseBucket(s.cfg.Stream))
	}
	return out, nil
}

// scan calls fn with every current entry of kv, delivered by one watch
// rather than a request per key. A bucket of 100,000 entries takes longer
// to deliver than one request may, so the timeout bounds the silence
// between entries, not the whole scan.
func (s *store) scan(ctx stdctx.Context, kv jetstream.KeyValue, fn func(jetstream.KeyValueEntry)) error {
	wctx, cancel := stdctx.WithCancel(ctx)
	defer cancel()
	w, err := kv.WatchAll(wctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	idle := time.NewTimer(s.cfg.ConnectTimeout)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-idle.C:
			return stdctx.DeadlineExceeded
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return nil // the initial values are in
			}
			fn(e)
			idle.Reset(s.cfg.ConnectTimeout)
		}
	}
}

func (s *store) putEntry(ctx stdctx.Context, id string, x indexEntry) {
	b, _ := json.Marshal(x)
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	if _, err := s.index.Put(tctx, id, b); err != nil {
		s.log.Warn("session.nats: cannot index a session; listings read its log until it is", "session", id, "error", err)
	}
}

// leased marks sum open when a host holds the session's lease.
func (s *store) leased(ctx stdctx.Context, sum session.Summary) session.Summary {
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	if e, err := s.leases.Get(tctx, sum.ID); err == nil {
		var h LeaseRecord
		json.Unmarshal(e.Value(), &h)
		sum.State, sum.Holder = session.StateOpen, h.Holder
	}
	return sum
}

// Delete purges a session's subject and its index entry under its lease:
// a session another writer holds is refused with SessionLocked naming the
// holder, and nothing is removed.
func (s *store) Delete(ctx stdctx.Context, sessionID string) error {
	subject, err := s.subject(sessionID)
	if err != nil {
		return err
	}
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	last, err := s.lastSeq(tctx, subject)
	if err != nil {
		return err
	}
	if last == 0 {
		return s.notFound(sessionID)
	}
	l, err := s.acquire(tctx, sessionID)
	if err != nil {
		if errs.HasCode(err, session.SessionLocked) {
			return errs.Wrap(session.SessionLocked, err, fmt.Sprintf(
				"cannot delete session %q while it is open", sessionID)).WithReason(errs.ReasonOf(err))
		}
		return err
	}
	perr := s.stream.Purge(tctx, jetstream.WithPurgeSubject(subject))
	if perr == nil {
		// A listing skips an entry without a log; this only keeps the
		// index small.
		if err := s.index.Purge(tctx, sessionID); err != nil {
			s.log.Warn("session.nats: cannot remove a deleted session from the index", "session", sessionID, "error", err)
		}
		s.forgetCatalog(tctx, sessionID)
	}
	rerr := l.release()
	if perr != nil {
		return s.failed(perr, fmt.Sprintf("purge session %q", sessionID))
	}
	return rerr
}
