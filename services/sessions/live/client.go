package live

import (
	stdctx "context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// AttachOptions describe a client attaching.
type AttachOptions struct {
	// AfterSeq is the last durable seq the client holds; 0 for all.
	AfterSeq int64
	// AfterNotice is the ID of the last notice the client holds; 0 for
	// every retained one.
	AfterNotice int64
	// Approvals: the client answers approval questions.
	Approvals bool
	// Name identifies the client to the others ("answered by Name");
	// default client-N.
	Name string
	// Buffer bounds this client's queue; default Options.Buffer.
	Buffer int
}

// Client is one attached client. Next is for one goroutine; Answer,
// Detach and LastSeq may be called from any.
type Client struct {
	hub       *Hub
	name      string
	approvals bool
	limit     int

	// Owned by the goroutine calling Next: the backlog, read first.
	loadFrom, loadTo int64
	loaded           []session.Event
	backlog          []session.Event

	last atomic.Int64

	mu    sync.Mutex
	queue []Update
	head  int
	err   error
	wake  chan struct{}
}

// Attach attaches a client; see the package doc for what its stream
// holds. AfterSeq beyond the session's last event fails with LIVE_BAD_SEQ;
// a client that answers approvals fails when another answerer is attached
// to the agent (APPROVAL_ANSWERER_ATTACHED) or no approval service is
// loaded.
func (h *Hub) Attach(ctx stdctx.Context, o AttachOptions) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed != nil {
		return nil, h.closed
	}
	if o.AfterSeq < 0 || o.AfterSeq > h.last {
		return nil, errs.New(BadSeq, fmt.Sprintf(
			"cannot attach to the session of agent %q after seq %d: it has events 1..%d; re-attach with a seq you received from this session, or 0",
			h.agent.ID(), o.AfterSeq, h.last))
	}
	h.named++
	if o.Name == "" {
		o.Name = fmt.Sprintf("client-%d", h.named)
	}
	if o.Buffer <= 0 {
		o.Buffer = h.opts.Buffer
	}
	c := &Client{hub: h, name: o.Name, approvals: o.Approvals, limit: o.Buffer, wake: make(chan struct{}, 1)}
	c.last.Store(o.AfterSeq)
	if o.Approvals {
		if err := h.approve(); err != nil {
			return nil, err
		}
	}
	// The backlog: what the window holds is copied now, what is older is
	// loaded when the client reads that far.
	if o.AfterSeq < h.last {
		from := o.AfterSeq + 1
		if from < h.first {
			c.loadFrom, c.loadTo = from, h.first-1
			from = h.first
		}
		c.backlog = append([]session.Event(nil), h.recent[from-h.first:]...)
	}
	for i := range h.notices {
		if h.notices[i].ID > o.AfterNotice {
			n := h.notices[i]
			c.queue = append(c.queue, Update{Kind: KindNotice, Notice: &n})
		}
	}
	if s := h.snapshot(); s != nil {
		c.queue = append(c.queue, Update{Kind: KindSnapshot, Snapshot: s})
	}
	if q := h.question; q != nil && o.Approvals {
		c.queue = append(c.queue, Update{Kind: KindQuestion, Question: &Question{ID: q.id, Request: q.req}})
	}
	h.clients[c] = struct{}{}
	return c, nil
}

// Name returns the client's name.
func (c *Client) Name() string { return c.name }

// LastSeq returns the seq of the last durable event Next returned: where
// to re-attach after a drop.
func (c *Client) LastSeq() int64 { return c.last.Load() }

// Next returns the next update, waiting for one until ctx ends. Once the
// client is detached, dropped or its Hub closed, Next returns the error
// that says why (LIVE_DETACHED, LIVE_CLIENT_OVERFLOW, LIVE_HUB_CLOSED).
func (c *Client) Next(ctx stdctx.Context) (Update, error) {
	if len(c.loaded) == 0 && c.loadFrom > 0 && c.loadFrom <= c.loadTo {
		if err := c.load(ctx); err != nil {
			return Update{}, err
		}
	}
	for _, q := range []*[]session.Event{&c.loaded, &c.backlog} {
		if len(*q) > 0 {
			e := (*q)[0]
			*q = (*q)[1:]
			c.last.Store(e.Seq)
			return Update{Kind: KindEvent, Seq: e.Seq, Event: &e}, nil
		}
	}
	for {
		c.mu.Lock()
		if c.head < len(c.queue) {
			u := c.queue[c.head]
			c.queue[c.head] = Update{}
			c.head++
			if c.head == len(c.queue) {
				c.queue, c.head = c.queue[:0], 0
			}
			c.mu.Unlock()
			if u.Kind == KindEvent {
				c.last.Store(u.Seq)
			}
			return u, nil
		}
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return Update{}, err
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			return Update{}, ctx.Err()
		}
	}
}

// load reads the events older than the Hub's window, in one call: the
// in-memory session can only copy from a seq to its end, and a store reads
// the whole file anyway, so pages would cost more than they save.
func (c *Client) load(ctx stdctx.Context) error {
	to := c.loadTo
	evs, err := c.hub.opts.Load(ctx, c.loadFrom, to)
	if err == nil && int64(len(evs)) != to-c.loadFrom+1 {
		err = fmt.Errorf("asked for events %d..%d, got %d", c.loadFrom, to, len(evs))
	}
	for i := 0; err == nil && i < len(evs); i++ {
		if evs[i].Seq != c.loadFrom+int64(i) {
			err = fmt.Errorf("event %d of the page has seq %d, want %d", i, evs[i].Seq, c.loadFrom+int64(i))
		}
	}
	if err != nil {
		return errs.Wrap(LoadFailed, err, fmt.Sprintf(
			"cannot read the events of agent %q older than the live window; the client stays attached, call Next again to retry", c.hub.agent.ID()))
	}
	c.loaded = evs
	c.loadFrom = to + 1
	return nil
}

// Detach ends the client: its Next returns LIVE_DETACHED, and a question
// it was asked stays with the other approving clients.
func (c *Client) Detach() {
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; ok {
		h.drop(c, errs.New(Detached, fmt.Sprintf("client %q detached from agent %q", c.name, h.agent.ID())))
	}
}

// push queues u; ok is false when the queue is full, idle says u is the
// only update queued. The caller holds the Hub's mu.
func (c *Client) push(u Update) (ok, idle bool) {
	c.mu.Lock()
	n := len(c.queue) - c.head
	if n >= c.limit {
		c.mu.Unlock()
		return false, false
	}
	c.queue = append(c.queue, u)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true, n == 0
}

func (c *Client) overflow() error {
	return errs.New(Overflow, fmt.Sprintf(
		"client %q fell %d updates behind agent %q and was dropped so the agent never waits for it; re-attach with AfterSeq %d (its last seq) to continue without a gap",
		c.name, c.limit, c.hub.agent.ID(), c.last.Load()))
}

// drop removes c with why; the caller holds the Hub's mu. An overflowed
// client loses its queue: re-attaching from its last seq gives it back.
func (h *Hub) drop(c *Client, why error) {
	delete(h.clients, c)
	c.mu.Lock()
	if c.err == nil {
		c.err = why
	}
	c.queue, c.head = nil, 0
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	if c.approvals {
		h.unapproveOne()
	}
}
