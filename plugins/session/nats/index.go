package nats

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dsh-go/dsh/services/session"
	"github.com/nats-io/nats.go/jetstream"
)

// The index is a key-value bucket beside the stream: one entry per stored
// session, keyed by its id, with what a listing shows (agent, title,
// times, turns, size, state) and where its log ends. A session's writer
// keeps its entry current after each checkpoint, so a listing, a claim or a
// host's read of one session costs a few requests whatever the number of
// sessions stored, instead of reading every log whole. The log stays the
// truth: a session whose entry is missing (a store older than the index, a
// host that died between the open and the entry) is described from its
// log once, and its entry written then.

// IndexBucket is the key-value bucket indexing the sessions of stream.
func IndexBucket(stream string) string { return stream + "_INDEX" }

// indexEntry is one session's entry in the index.
type indexEntry struct {
	Agent   string    `json:"agent,omitempty"`
	Tenant  string    `json:"tenant,omitempty"`
	Title   string    `json:"title,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Turns   int       `json:"turns"`
	// Events is the seq of the last event stored; Last is the stream
	// sequence of the last message of the log, Born of its first.
	Events int64  `json:"events"`
	Last   uint64 `json:"last"`
	Born   uint64 `json:"born"`
	Size   int64  `json:"size"`
	// Msgs counts the messages of the log, its open record included; a
	// count the stream disagrees with is an entry that lags its log.
	Msgs uint64 `json:"msgs"`
	// Ended is whether the last event ends a turn: a log that stops
	// inside one was interrupted.
	Ended bool `json:"ended"`
}

// note adds event e, stored as data at stream sequence seq.
func (x *indexEntry) note(who author, e session.Event, size int, seq uint64) {
	if x.Events == 0 {
		x.Created = e.Time
	}
	if who.agent != "" {
		x.Agent = who.agent
	}
	if who.tenant != "" && x.Tenant == "" {
		x.Tenant = who.tenant
	}
	if x.Title == "" && e.Type == session.UserMessage && e.Message != nil {
		x.Title = session.Title(e.Message.Content)
	}
	x.Updated, x.Turns, x.Events, x.Last = e.Time, e.Turn, e.Seq, seq
	x.Size += int64(size)
	x.Msgs++
	x.Ended = e.Type == session.TurnEnd
}

// summary is the entry as a listing shows it, before the lease is asked.
func (x indexEntry) summary(id string) session.Summary {
	sum := session.Summary{ID: id, Agent: x.Agent, Tenant: x.Tenant, Title: x.Title, Created: x.Created, Updated: x.Updated,
		Turns: x.Turns, Size: x.Size, LastSeq: x.Events, State: session.StateIdle}
	if x.Events > 0 && !x.Ended {
		sum.State = session.StateInterrupted
	}
	return sum
}

// openIndex binds the index bucket, creating it — and, when the store had
// none, building it from the logs — if it does not exist.
func (s *store) openIndex(ctx stdctx.Context) error {
	name := IndexBucket(s.cfg.Stream)
	kv, err := s.js.KeyValue(ctx, name)
	if err == nil {
		// Its Get tells a lock where a log starts: read from the leader.
		s.index = LeaderKV(kv, s.nc)
		return nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return err
	}
	if kv, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      name,
		Description: "dsh session index: one entry per stored session",
		History:     1,
		Replicas:    s.cfg.Replicas,
		Storage:     jetstream.FileStorage,
	}); err != nil {
		return err
	}
	s.index = LeaderKV(kv, s.nc)
	// A store older than the index: describe every log once. Entries are
	// created only if absent, so a writer's newer entry is never replaced.
	list, err := s.subjects(ctx)
	if err != nil {
		return err
	}
	// Each log is read within its own timeout, not the bucket's.
	ctx = stdctx.WithoutCancel(ctx)
	s.log.Info("session.nats: building the session index from the stored logs, once", "sessions", len(list), "bucket", name)
	for id := range list {
		if x, ok := s.describe(ctx, id); ok {
			s.createEntry(ctx, id, x)
		}
	}
	return nil
}

// describe builds session id's entry from its log; ok is false when the
// log cannot be read.
func (s *store) describe(ctx stdctx.Context, id string) (indexEntry, bool) {
	l, err := s.readLog(ctx, id)
	if err != nil {
		return indexEntry{}, false
	}
	x := indexEntry{Born: l.born}
	for _, e := range l.events {
		raw, _ := json.Marshal(e)
		x.note(author{l.agent, l.tenant}, e, len(raw), l.last)
	}
	x.Last, x.Msgs = l.last, l.msgs
	return x, true
}

func (s *store) createEntry(ctx stdctx.Context, id string, x indexEntry) {
	b, _ := json.Marshal(x)
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	if _, err := s.index.Create(tctx, id, b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		s.log.Warn("session.nats: cannot index a session; listings read its log until it is", "session", id, "error", err)
	}
}

// entry reads session id's entry; ok is false when it has none.
func (s *store) entry(ctx stdctx.Context, id string) (indexEntry, bool, error) {
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	e, err := s.index.Get(tctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return indexEntry{}, false, nil
	}
	if err != nil {
		return indexEntry{}, false, s.failed(err, fmt.Sprintf("read the index entry of session %q", id))
	}
	var x indexEntry
	if err := json.Unmarshal(e.Value(), &x); err != nil {
		return indexEntry{}, false, nil // rebuilt from the log
	}
	return x, true, nil
}

// indexer writes a writer's entry after its checkpoints, off their path:
// a checkpoint waits for its events' acks, never for the index. Puts are
// coalesced, and at least indexEvery apart: the first checkpoint after a
// quiet spell is indexed at once, and a burst of them — a tool's result
// right after the call, a session driven back to back — costs one put
// every indexEvery and one at its end, not a second replicated write per
// step. The entry then lags its log a little longer; nothing depends on
// it being current (List, Find and a page's checks compare it with the
// log's end and read the log when it lags; an open marker keeps a page
// from trusting the catalog), and release puts the last one at once.
type indexer struct {
	busy bool // under the writer's mu
	done sync.WaitGroup
	// last is when the last put began; only the loop that runs uses it.
	last time.Time
	// hurry, made by the first loop and closed by release, ends the wait
	// for indexEvery.
	hurry   chan struct{}
	hurried bool
}

// indexEvery is the least time between two puts of one session's entry;
// a variable so that a test can stretch it.
var indexEvery = 50 * time.Millisecond

// reindex writes the writer's entry soon; the caller holds wr.mu.
func (wr *writer) reindex() {
	wr.dirty = true
	if wr.index.busy || wr.store.index == nil {
		return
	}
	wr.index.busy = true
	if wr.index.hurry == nil {
		wr.index.hurry = make(chan struct{})
	}
	wr.index.done.Add(1)
	go wr.indexLoop(wr.index.hurry)
}

// indexNow has the coming put, and any after it, go without waiting out
// indexEvery: release waits for the last one.
func (wr *writer) indexNow() {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if wr.index.hurried {
		return
	}
	wr.index.hurried = true
	if wr.index.hurry == nil {
		// Never indexed: a loop that starts now does not wait either.
		wr.index.hurry = closedChan
		return
	}
	close(wr.index.hurry)
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (wr *writer) indexLoop(hurry <-chan struct{}) {
	defer wr.index.done.Done()
	for {
		if wait := indexEvery - time.Since(wr.index.last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-hurry:
				t.Stop()
			}
		}
		wr.mu.Lock()
		if !wr.dirty {
			wr.index.busy = false
			wr.mu.Unlock()
			return
		}
		wr.dirty = false
		x, known, last := wr.entry, wr.known, wr.last
		wr.mu.Unlock()
		ctx, cancel := wr.store.timeout(stdctx.Background())
		if !known {
			// Taken over from a writer whose last entry did not land: the
			// log says what the entry is.
			var ok bool
			if x, ok = wr.store.describe(ctx, wr.id); !ok || x.Last != last {
				// Unreadable, or appended to meanwhile: the write that
				// appended set dirty, and the loop reads the log again.
				cancel()
				continue
			}
			wr.mu.Lock()
			if wr.last == last {
				wr.entry, wr.known = x, true
			} else {
				wr.dirty = true
			}
			wr.mu.Unlock()
		}
		b, _ := json.Marshal(x)
		wr.index.last = time.Now()
		_, err := wr.store.index.Put(ctx, wr.id, b)
		if wr.cat.marker == 0 {
			// While its open marker stands, listings describe the session
			// from this entry or its log, never from its catalog entry
			// (pages.go), so the catalog is written once, on release
			// (unmarkCatalog), not once more per checkpoint: a step's
			// second replicated write saved.
			wr.catalogPut(ctx, x)
		}
		cancel()
		if err != nil {
			// The log is stored; only listings lag until the next put.
			wr.store.log.Warn("session.nats: cannot update the index entry of a session", "session", wr.id, "error", err)
		}
	}
}
