package cluster

import (
	"cmp"
	stdctx "context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/errs"
	"github.com/nats-io/nats.go/jetstream"
)

// Every host that claims sessions keeps the queue bucket (queue.go) in
// memory, through one watch opened when it joins: a resume asks this view
// which prompts wait for its session. It used to open a watch of its own
// per session — an ephemeral consumer, which a clustered server creates
// and deletes through its meta leader: a host adopting a thousand
// sessions queued two thousand proposals there.
//
// The view lags the bucket by what is in flight to this host. A resume
// that reads it first writes a mark (markKey) and waits until the view
// has seen it: the watch delivers in stream order, so every entry stored
// before the mark is in the view then — and a prompt its previous owner
// accepted was stored before that owner answered. Resumes that come while
// a mark is in flight share the next one.

// markPrefix starts the keys of the marks; queue entries are two hashes.
const markPrefix = "mark."

// queueView is this host's copy of the queue bucket.
type queueView struct {
	mu sync.Mutex
	// entries: hashToken(session id) → key → entry.
	entries map[string]map[string]jetstream.KeyValueEntry
	seen    uint64        // highest revision applied
	grew    chan struct{} // closed, and replaced, when seen grows
	// cur is the mark in flight; next the one that starts after it.
	cur, next *queueMark

	watch jetstream.KeyWatcher
	done  chan struct{} // closed when the watch loop ends
}

type queueMark struct {
	done chan struct{}
	err  error
}

// watchQueue starts the view.
func (h *Host) watchQueue(ctx stdctx.Context) error {
	w, err := h.queue.WatchAll(ctx)
	if err != nil {
		return errs.Wrap(Unreachable, err, "cluster: cannot watch the queue bucket "+h.queue.Bucket())
	}
	h.qview = &queueView{entries: map[string]map[string]jetstream.KeyValueEntry{}, grew: make(chan struct{}),
		watch: w, done: make(chan struct{})}
	go h.qview.run(ctx)
	return nil
}

func (v *queueView) run(ctx stdctx.Context) {
	defer close(v.done)
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-ctx.Done():
			return
		case u, ok := <-v.watch.Updates():
			if !ok {
				return
			}
			e = u
		}
		if e != nil {
			v.apply(e)
		}
	}
}

func (v *queueView) apply(e jetstream.KeyValueEntry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if sid, _, ok := strings.Cut(e.Key(), "."); ok && !strings.HasPrefix(e.Key(), markPrefix) {
		if e.Operation() == jetstream.KeyValuePut {
			if v.entries[sid] == nil {
				v.entries[sid] = map[string]jetstream.KeyValueEntry{}
			}
			v.entries[sid][e.Key()] = e
		} else {
			delete(v.entries[sid], e.Key())
			if len(v.entries[sid]) == 0 {
				delete(v.entries, sid)
			}
		}
	}
	if e.Revision() > v.seen {
		v.seen = e.Revision()
		close(v.grew)
		v.grew = make(chan struct{})
	}
}

// stop ends the watch; connected says whether the server can be told.
func (v *queueView) stop(connected bool) {
	if connected {
		// Stopping deletes the watch's consumer on the server, which waits
		// out a request timeout while the server is away; the connection's
		// close ends the watch then.
		v.watch.Stop()
	}
	<-v.done
}

// queuedFor returns the entries stored for session id, oldest first, as of
// a mark written after this call.
func (h *Host) queuedFor(ctx stdctx.Context, id string) ([]jetstream.KeyValueEntry, error) {
	v := h.qview
	err := h.markQueue(ctx)
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []jetstream.KeyValueEntry
	for _, e := range v.entries[hashToken(id)] {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b jetstream.KeyValueEntry) int { return cmp.Compare(a.Revision(), b.Revision()) })
	return out, err
}

// markQueue writes a mark that begins after this call, and waits until the
// view has seen it.
func (h *Host) markQueue(ctx stdctx.Context) error {
	v := h.qview
	v.mu.Lock()
	var m *queueMark
	switch {
	case v.cur == nil:
		v.cur = &queueMark{done: make(chan struct{})}
		m = v.cur
		h.startMark(m)
	case v.next == nil:
		v.next = &queueMark{done: make(chan struct{})}
		m = v.next
	default:
		m = v.next
	}
	v.mu.Unlock()
	select {
	case <-m.done:
		return m.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startMark writes mark m on its own goroutine, which Close waits for,
// then the next one if callers asked for it meanwhile; the caller holds
// v.mu.
func (h *Host) startMark(m *queueMark) {
	v := h.qview
	h.mu.Lock()
	leaving := h.ctx.Err() != nil
	if !leaving {
		h.drops.Add(1)
	}
	h.mu.Unlock()
	if leaving {
		m.err = stdctx.Canceled
		v.cur = nil
		close(m.done)
		return
	}
	go func() {
		defer h.drops.Done()
		m.err = h.writeMark()
		v.mu.Lock()
		v.cur, v.next = v.next, nil
		if v.cur != nil {
			h.startMark(v.cur)
		}
		v.mu.Unlock()
		close(m.done)
	}()
}

func (h *Host) writeMark() error {
	v := h.qview
	ctx, cancel := stdctx.WithTimeout(h.ctx, h.o.ConnectTimeout)
	defer cancel()
	rev, err := h.queue.Put(ctx, markPrefix+h.o.HostID, []byte(strconv.FormatInt(int64(h.marks.Add(1)), 10)))
	if err != nil {
		return err
	}
	for {
		v.mu.Lock()
		seen, grew := v.seen, v.grew
		v.mu.Unlock()
		if seen >= rev {
			return nil
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
