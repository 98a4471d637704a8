package nats

import (
	stdctx "context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/services/session"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The catalog is a stream beside the logs that lets a listing show its
// first page — one agent's sessions, most recently updated first — from a
// bounded read of its tail, where List reads every session's subject,
// index entry and lease (issue 38: 100,000 sessions). It keeps one message
// per subject (MaxMsgsPerSubject 1), on three kinds of subject under
// <Stream>_CATALOG:
//
//   - s.<agent>.<id>: the session's index entry as its writer left it on
//     release (while a writer holds the session its open marker stands in
//     for the entry, so a step writes none), with Mark, an upper bound on
//     the update time of every entry stored before it (the writer's clock
//     plus catalogSkew). A session updated
//     later is stored later, so its newest entries sit at the stream's
//     tail: a page is read backwards from there, in windows, until the
//     page's last session is newer than the Mark of every entry read —
//     nothing stored before them can belong on it. The agent token lets
//     the server send one agent's entries only.
//   - o.<id>: the open marker. A writer stores it as soon as it holds the
//     session's lease, before it writes the log, and removes it on release
//     once the catalog holds the entry of the log as it leaves it. A
//     listing reads every marker and describes those sessions from their
//     index entry or log: an entry that lags its log — a writer in the
//     middle of a step, or one that died between its log and its entry —
//     is never trusted, and the marker of a dead writer is repaired away.
//   - built: stored once the catalog was filled from a store older than it;
//     until then listings page through List.
//
// The logs stay the truth: each session of a page is checked against its
// log's end (a leader read); one whose entry names another end is
// described from its log, and one whose log is gone is left out.

// CatalogStream is the stream that orders the sessions of stream for
// paged listings.
func CatalogStream(stream string) string { return stream + "_CATALOG" }

// catalogSkew is how far the clocks of the hosts writing one store may
// disagree, and so how far back past a page's last session a listing
// reads: an entry's Mark is its writer's clock plus this.
const catalogSkew = time.Minute

// catalogEntry is a session's message in the catalog.
type catalogEntry struct {
	indexEntry
	Mark time.Time `json:"mark"`
}

// catalog is the store's handle on its catalog stream.
type catalog struct {
	stream jetstream.Stream
	name   string
	prefix string // of its subjects
	leader LeaderReader
	built  atomic.Bool
}

func (c *catalog) entrySubject(agent, id string) string {
	return c.prefix + ".s." + agentToken(agent) + "." + idToken(id)
}

func (c *catalog) markerSubject(id string) string { return c.prefix + ".o." + idToken(id) }

// agentToken names in a subject the agents a listing of agent matches
// (session.MatchAgent): "<agent>" and "<agent>@<session>" share one.
func agentToken(agent string) string {
	base, _, _ := strings.Cut(agent, "@")
	if base == "" {
		return "-"
	}
	return hex.EncodeToString([]byte(base))
}

func idToken(id string) string { return strings.ReplaceAll(id, ".", "%2E") }

// openCatalog binds the catalog stream, creating it and filling it from
// the index and the logs when the store has none.
func (s *store) openCatalog(ctx stdctx.Context) error {
	name := CatalogStream(s.cfg.Stream)
	prefix := "dshcat." + s.cfg.Stream
	st, err := BindOrCreateStream(ctx, s.js, jetstream.StreamConfig{
		Name:              name,
		Description:       "dsh session catalog: the sessions in the order they were last written, for paged listings",
		Subjects:          []string{prefix + ".>"},
		MaxMsgsPerSubject: 1,
		Storage:           jetstream.FileStorage,
		Replicas:          s.cfg.Replicas,
		AllowDirect:       true,
	})
	if err != nil {
		return err
	}
	c := &catalog{stream: st, name: name, prefix: prefix, leader: NewLeaderReader(s.nc, name)}
	s.cat = c
	if _, err := c.leader.Last(ctx, prefix+".built"); err == nil {
		c.built.Store(true)
		return nil
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return err
	}
	return s.buildCatalog(stdctx.WithoutCancel(ctx))
}

// buildCatalog stores an entry for every session, oldest update first, so
// a catalog made for an older store is in order too. An entry is stored
// only where the session has none, so a writer's newer one stays. Hosts
// starting together may both build; they store the same.
func (s *store) buildCatalog(ctx stdctx.Context) error {
	counts, err := s.subjects(ctx)
	if err != nil {
		return err
	}
	var entries map[string]indexEntry
	if len(counts) > 0 {
		if entries, err = s.indexed(ctx); err != nil {
			return err
		}
		s.log.Info("session.nats: building the session catalog from the index, once", "sessions", len(counts), "stream", s.cat.name)
	}
	type one struct {
		id string
		x  indexEntry
	}
	all := make([]one, 0, len(counts))
	for id, n := range counts {
		x, ok := entries[id]
		if !ok || x.Msgs != n {
			if x, ok = s.describe(ctx, id); !ok {
				continue // a listing shows it corrupt, from its log
			}
		}
		all = append(all, one{id, x})
	}
	slices.SortFunc(all, func(a, b one) int { return a.x.Updated.Compare(b.x.Updated) })
	mark := time.Now().Add(catalogSkew)
	for i, o := range all {
		b, _ := json.Marshal(catalogEntry{indexEntry: o.x, Mark: mark})
		if _, err := s.js.PublishAsync(s.cat.entrySubject(o.x.Agent, o.id), b, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
			return err
		}
		if i%1000 == 999 {
			if err := s.catalogAcked(ctx); err != nil {
				return err
			}
		}
	}
	if err := s.catalogAcked(ctx); err != nil {
		return err
	}
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	if _, err := s.js.Publish(tctx, s.cat.prefix+".built", nil); err != nil {
		return err
	}
	s.cat.built.Store(true)
	return nil
}

// catalogAcked waits for the build's publishes; one refused because the
// session has an entry already is what the build wants.
func (s *store) catalogAcked(ctx stdctx.Context) error {
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	select {
	case <-s.js.PublishAsyncComplete():
		return nil
	case <-tctx.Done():
		return fmt.Errorf("building the catalog %s: publishes not acked: %w", s.cat.name, tctx.Err())
	}
}

// catalogMark is what a writer knows of its session in the catalog.
type catalogMark struct {
	marker uint64 // sequence of its open marker; 0: none
	// subject of the session's entry (from its index entry, until the
	// writer stores one), and the log end (last) the entry it stored
	// describes.
	subject string
	last    uint64
}

// newCatalogMark is what a writer that took session id knows: its open
// marker, and its index entry x when current.
func (s *store) newCatalogMark(id string, marker uint64, x indexEntry, current bool) catalogMark {
	m := catalogMark{marker: marker}
	if s.cat != nil && current {
		m.subject = s.cat.entrySubject(x.Agent, id)
	}
	return m
}

// markCatalog stores session id's open marker, before its writer may
// change its log; it returns the marker's sequence.
func (s *store) markCatalog(ctx stdctx.Context, id string) (uint64, error) {
	if s.cat == nil {
		return 0, nil
	}
	ack, err := s.js.Publish(ctx, s.cat.markerSubject(id), nil)
	if err != nil {
		return 0, s.failed(err, fmt.Sprintf("mark session %q open in the catalog %s", id, s.cat.name))
	}
	return ack.Sequence, nil
}

// catalogPut stores x, the writer's entry as of x.Last, in the catalog;
// release calls it once the last index entry is in (the index loop calls
// it only for a writer without an open marker).
func (wr *writer) catalogPut(ctx stdctx.Context, x indexEntry) {
	c := wr.store.cat
	if c == nil {
		return
	}
	subject := c.entrySubject(x.Agent, wr.id)
	b, _ := json.Marshal(catalogEntry{indexEntry: x, Mark: time.Now().Add(catalogSkew)})
	_, err := wr.store.js.Publish(ctx, subject, b)
	if err != nil {
		// The open marker stays: listings read this session's log.
		wr.store.log.Warn("session.nats: cannot update the catalog entry of a session", "session", wr.id, "error", err)
		return
	}
	if old := wr.cat.subject; old != "" && old != subject {
		// The session's agent changed: its entry under the former one
		// goes. Under the lease, nobody else writes it.
		c.stream.Purge(ctx, jetstream.WithPurgeSubject(old))
	}
	wr.cat.subject, wr.cat.last = subject, x.Last
}

// unmarkCatalog removes the writer's open marker on release, once the
// catalog holds the entry of the log as the writer leaves it. It stays
// when that cannot be told; listings then read the log and repair it.
func (wr *writer) unmarkCatalog() {
	c := wr.store.cat
	if c == nil || wr.cat.marker == 0 {
		return
	}
	wr.mu.Lock()
	last, x, known, broken := wr.last, wr.entry, wr.known, wr.broken
	wr.mu.Unlock()
	if broken != nil {
		return // another writer may own the log now
	}
	ctx, cancel := wr.store.timeout(stdctx.Background())
	defer cancel()
	if wr.cat.last != last {
		// A session resumed and left unchanged has no entry put yet.
		if !known || x.Last != last {
			return
		}
		wr.catalogPut(ctx, x)
		if wr.cat.last != last {
			return
		}
	}
	// By sequence: a marker stored since, by the next owner, stays.
	c.stream.DeleteMsg(ctx, wr.cat.marker)
}

// forgetCatalog removes a deleted session's entries and marker; the
// caller holds its lease. One left behind names a log that is gone, and
// listings leave it out.
func (s *store) forgetCatalog(ctx stdctx.Context, id string) {
	if s.cat == nil {
		return
	}
	for _, subject := range []string{s.cat.prefix + ".s.*." + idToken(id), s.cat.markerSubject(id)} {
		if err := s.cat.stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
			s.log.Warn("session.nats: cannot remove a deleted session from the catalog", "session", id, "error", err)
		}
	}
}

// pageItem is a session a page may show.
type pageItem struct {
	sum session.Summary
	x   indexEntry
	// subject and seq of its catalog entry; seq 0 when it has none.
	subject string
	seq     uint64
	// checked: described from its index entry or log, its lease read.
	checked bool
	// marker is the sequence of its open marker, 0 when it has none.
	marker uint64
	// out: checked, and not on the page (its log is gone, or it is not
	// what the page asks for); kept so the tail does not bring it back.
	out bool
}

// ListPage lists one page of the stored sessions (session.PageLister)
// from the catalog: its open markers, its tail read backwards until the
// page is certain, and the page's sessions checked against their logs.
func (s *store) ListPage(ctx stdctx.Context, opts session.ListOptions) (session.Page, error) {
	var cu time.Time
	var cid string
	if opts.Cursor != "" {
		var err error
		if cu, cid, err = session.ParseCursor(opts.Cursor); err != nil {
			return session.Page{}, err
		}
	}
	// A listing of everything reads everything: List does it in three
	// requests, where checking each session would take two apiece.
	if opts.Limit <= 0 || !s.catalogReady(ctx) {
		list, err := s.List(ctx)
		if err != nil {
			return session.Page{}, err
		}
		return session.Paginate(list, opts)
	}
	keep := func(sum session.Summary) bool {
		return session.MatchAgent(sum.Agent, opts.Agent) && (opts.Cursor == "" || session.After(sum, cu, cid))
	}
	// The markers first: a writer removes its marker only after its last
	// entry is stored, so an entry the tail read misses has a marker here.
	marked, err := s.markers(ctx)
	if err != nil {
		return session.Page{}, err
	}
	items := map[string]*pageItem{}
	for id, seq := range marked {
		items[id] = &pageItem{sum: session.Summary{ID: id}, marker: seq}
	}
	s.check(ctx, items)
	for _, it := range items {
		it.out = it.sum.ID == "" || !keep(it.sum)
	}
	t, err := s.newTail(ctx, opts.Agent, opts.Limit, keep)
	if err != nil {
		return session.Page{}, err
	}
	if err := t.read(ctx, items); err != nil {
		return session.Page{}, err
	}
	for {
		// A check below may have left a session out or moved it: the
		// page is certain again only if its limit-th session is still
		// newer than anything stored before the windows read, else older
		// windows are read first. (Without this, a session stored before
		// the windows and newer than the one that took the place of a
		// dropped one was skipped, and the cursor walked past it.)
		if !t.certain(items) && t.hi > 0 {
			if err := t.read(ctx, items); err != nil {
				return session.Page{}, err
			}
		}
		page := sorted(items)
		more := t.hi > 0
		if opts.Limit > 0 && len(page) > opts.Limit {
			page, more = page[:opts.Limit], true
		}
		// Check the page's sessions against their logs; one that changes
		// (left out, or moved) is sorted again with the rest.
		todo := map[string]*pageItem{}
		for _, it := range page {
			if !it.checked {
				todo[it.sum.ID] = it
			}
		}
		if len(todo) == 0 {
			var p session.Page
			for _, it := range page {
				p.Sessions = append(p.Sessions, it.sum)
			}
			if more && len(p.Sessions) > 0 {
				p.Next = session.Cursor(p.Sessions[len(p.Sessions)-1])
			}
			return p, nil
		}
		s.check(ctx, todo)
		for _, it := range todo {
			it.out = it.sum.ID == "" || !keep(it.sum)
		}
		if err := ctx.Err(); err != nil {
			return session.Page{}, s.failed(err, "list a page of the sessions")
		}
	}
}

func sorted(items map[string]*pageItem) []*pageItem {
	out := make([]*pageItem, 0, len(items))
	for _, it := range items {
		if !it.out {
			out = append(out, it)
		}
	}
	slices.SortFunc(out, func(a, b *pageItem) int {
		switch {
		case session.Newer(a.sum, b.sum):
			return -1
		case session.Newer(b.sum, a.sum):
			return 1
		}
		return 0
	})
	return out
}

// catalogReady reports whether the catalog holds every session.
func (s *store) catalogReady(ctx stdctx.Context) bool {
	if s.cat == nil {
		return false
	}
	if s.cat.built.Load() {
		return true
	}
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	if _, err := s.cat.leader.Last(tctx, s.cat.prefix+".built"); err == nil {
		s.cat.built.Store(true)
	}
	return s.cat.built.Load()
}

// markers are the open markers: session id → the marker's sequence.
func (s *store) markers(ctx stdctx.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	filter := s.cat.prefix + ".o.>"
	_, err := s.catalogRange(ctx, 1, 0, filter, 1024, func(seq uint64, subject string, _ []byte) {
		out[strings.ReplaceAll(strings.TrimPrefix(subject, s.cat.prefix+".o."), "%2E", ".")] = seq
	})
	if err != nil {
		return nil, s.failed(err, "read the open markers of the catalog "+s.cat.name)
	}
	return out, nil
}

// tail reads the catalog entries of one agent backwards from the end, in
// growing windows, and remembers where it stopped: a page may need more
// of it once its sessions are checked.
type tail struct {
	s       *store
	filter  string
	sPrefix string
	limit   int
	keep    func(session.Summary) bool
	// bound is the least Mark read (zero: none yet); hi the last sequence
	// not read yet (0: the whole catalog is read) and w the next window.
	bound time.Time
	hi, w uint64
}

func (s *store) newTail(ctx stdctx.Context, agent string, limit int, keep func(session.Summary) bool) (*tail, error) {
	tctx, cancel := s.timeout(ctx)
	info, err := s.cat.stream.Info(tctx)
	cancel()
	if err != nil {
		return nil, s.failed(err, "read the end of the catalog "+s.cat.name)
	}
	filter := s.cat.prefix + ".s.>"
	if agent != "" {
		filter = s.cat.prefix + ".s." + agentToken(agent) + ".>"
	}
	return &tail{s: s, filter: filter, sPrefix: s.cat.prefix + ".s.", limit: limit, keep: keep,
		hi: info.State.LastSeq, w: uint64(max(256, 4*limit))}, nil
}

// certain reports whether the limit-th newest of items is newer than any
// entry stored before the windows read, so nothing unread belongs on the
// page.
func (t *tail) certain(items map[string]*pageItem) bool {
	if t.limit <= 0 {
		return t.hi == 0
	}
	page := sorted(items)
	return len(page) >= t.limit && !t.bound.IsZero() && page[t.limit-1].sum.Updated.After(t.bound)
}

// read adds to items the entries that keep accepts, window after window,
// until the page is certain or the catalog is read (limit 0: the whole
// catalog). Entries of sessions already in items (marked ones, described
// from their logs) are skipped.
func (t *tail) read(ctx stdctx.Context, items map[string]*pageItem) error {
	s := t.s
	for t.hi > 0 {
		lo := uint64(1)
		if t.hi > t.w {
			lo = t.hi - t.w + 1
		}
		_, err := s.catalogRange(ctx, lo, t.hi, t.filter, int(min(t.w, 4096)), func(seq uint64, subject string, data []byte) {
			rest, ok := strings.CutPrefix(subject, t.sPrefix)
			if !ok {
				return
			}
			_, tok, ok := strings.Cut(rest, ".")
			if !ok {
				return
			}
			var ce catalogEntry
			if json.Unmarshal(data, &ce) != nil {
				return // its session is then listed as its marker or log says
			}
			if !ce.Mark.IsZero() && (t.bound.IsZero() || ce.Mark.Before(t.bound)) {
				t.bound = ce.Mark
			}
			id := strings.ReplaceAll(tok, "%2E", ".")
			if old, ok := items[id]; ok && (old.checked || old.out || old.seq > seq) {
				return
			}
			sum := ce.summary(id)
			if !t.keep(sum) {
				return
			}
			items[id] = &pageItem{sum: sum, x: ce.indexEntry, subject: subject, seq: seq}
		})
		if err != nil {
			return s.failed(err, "read the catalog "+s.cat.name)
		}
		t.hi, t.w = lo-1, 2*t.w
		if t.limit > 0 && t.certain(items) {
			return nil
		}
	}
	return nil
}

// catalogRange calls fn with each catalog message on filter from stream
// sequence lo to hi (0: the end), in order, in direct-get batches of n.
// It returns the last sequence it read.
func (s *store) catalogRange(ctx stdctx.Context, lo, hi uint64, filter string, n int, fn func(seq uint64, subject string, data []byte)) (uint64, error) {
	from, last := lo, uint64(0)
	for {
		tctx, cancel := s.timeout(ctx)
		got, pending := 0, uint64(0)
		done := false
		_, err := directBatchOf(tctx, s.nc, s.cat.name, filter, from, n, false, func(seq uint64, h natsgo.Header, data []byte) error {
			pending, _ = strconv.ParseUint(h.Get(numPendingHeader), 10, 64)
			if hi != 0 && seq > hi {
				done = true
				return errStop
			}
			got++
			last = seq
			fn(seq, h.Get(jetstream.SubjectHeader), data)
			return nil
		})
		cancel()
		if errors.Is(err, errStop) {
			err = nil
		}
		if err != nil {
			return last, err
		}
		if done || got == 0 || pending == 0 || (hi != 0 && last >= hi) {
			return last, nil
		}
		from = last + 1
	}
}

// numPendingHeader tells, on each message of a direct-get batch, how many
// more match its filter.
const numPendingHeader = "Nats-Num-Pending"

// errStop ends a direct batch early.
var errStop = errors.New("stop")

// check describes items from their logs' ends, index entries and leases,
// a few at once: an item whose log is gone, or that cannot be described,
// gets an empty ID, or a corrupt summary. A stale catalog entry, or the
// marker of a dead writer, is repaired where no writer holds the session.
func (s *store) check(ctx stdctx.Context, items map[string]*pageItem) {
	work := make(chan *pageItem)
	var wg sync.WaitGroup
	for range min(16, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				s.checkOne(ctx, it)
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
}

func (s *store) checkOne(ctx stdctx.Context, it *pageItem) {
	id := it.sum.ID
	it.checked = true
	subject, err := s.subject(id)
	if err != nil {
		it.sum.ID = ""
		return
	}
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	last, err := s.lastSeq(tctx, subject)
	if err != nil {
		it.sum.State, it.sum.Error = session.StateCorrupt, err.Error()
		return
	}
	// held unless the lease is known to be free: a marker is never
	// repaired away on a read that failed.
	var holder string
	held, free := false, false
	if e, err := s.leases.Get(tctx, id); err == nil {
		var h LeaseRecord
		json.Unmarshal(e.Value(), &h)
		holder, held = h.Holder, true
	} else {
		free = errors.Is(err, jetstream.ErrKeyNotFound)
	}
	if last == 0 {
		if free {
			s.repairCatalog(ctx, it, nil)
		}
		it.sum.ID = ""
		return
	}
	x, current := it.x, it.seq != 0 && it.x.Last == last
	if !current {
		if ix, ok, _ := s.entry(ctx, id); ok && ix.Last == last {
			x, current = ix, true
		} else if dx, ok := s.describe(ctx, id); ok {
			x, current = dx, true
		}
	}
	if !current {
		_, err := s.readLog(ctx, id)
		it.sum = session.Summary{ID: id, Agent: it.sum.Agent, Updated: it.sum.Updated, State: session.StateCorrupt, Error: errString(err)}
		return
	}
	stale := it.seq == 0 || it.x.Last != x.Last || it.x.Agent != x.Agent
	it.x, it.sum = x, x.summary(id)
	if held {
		it.sum.State, it.sum.Holder = session.StateOpen, holder
	} else if free && (stale || it.marker != 0) {
		s.repairCatalog(ctx, it, &x)
	}
}

// repairCatalog stores entry x of a session nobody holds, in place of the
// catalog entry the listing read, and removes its marker; x nil: the log
// is gone, and so go they. Each write expects what the listing read, so a
// writer that took the session meanwhile is never overwritten.
func (s *store) repairCatalog(ctx stdctx.Context, it *pageItem, x *indexEntry) {
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	if x != nil {
		subject := s.cat.entrySubject(x.Agent, it.sum.ID)
		var expect uint64
		if subject == it.subject {
			expect = it.seq
		} else if m, err := s.cat.leader.Last(tctx, subject); err == nil {
			expect = m.Sequence
		} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return
		}
		b, _ := json.Marshal(catalogEntry{indexEntry: *x, Mark: time.Now().Add(catalogSkew)})
		if _, err := s.js.Publish(tctx, subject, b, jetstream.WithExpectLastSequencePerSubject(expect)); err != nil {
			return // a writer came, or the server is away: the next listing tries again
		}
	}
	if it.seq != 0 && (x == nil || it.subject != s.cat.entrySubject(x.Agent, it.sum.ID)) {
		s.cat.stream.DeleteMsg(tctx, it.seq)
	}
	if it.marker != 0 {
		s.cat.stream.DeleteMsg(tctx, it.marker)
	}
}
