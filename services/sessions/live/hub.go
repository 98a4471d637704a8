package live

import (
	stdctx "context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// Loader reads the durable events with from <= Seq <= to, in order.
type Loader func(ctx stdctx.Context, from, to int64) ([]session.Event, error)

// Options configure a Hub. Zero values take the defaults.
type Options struct {
	// Window is how many recent durable events the Hub keeps for
	// attaching clients; default 1024.
	Window int
	// Load reads events older than the window; default: the agent's
	// session in memory.
	Load Loader
	// Buffer bounds each client's queue of live updates; default 1024.
	Buffer int
	// Notices is how many notices the Hub keeps for clients that attach
	// later; default 32.
	Notices int
	// Approvals is the approval service; default: the one in the agent's
	// scope (approval.Key), if any.
	Approvals *approval.Service
	// ApproverGrace is how long the Hub stays the agent's answerer after
	// its last approving client detaches (a page that reloads, a stream
	// dropped as too slow): a question asked meanwhile waits for the next
	// approving client. Past it, or with 0 (the default: a headless run
	// has nobody to wait for), the question fails closed. (The wait for a
	// first answerer is the approval service's: SetAttachGrace.)
	ApproverGrace time.Duration
}

const (
	defaultWindow  = 1024
	defaultBuffer  = 1024
	defaultNotices = 32
)

// Hub serves one agent's session to attached clients; see the package doc.
type Hub struct {
	agent agents.Agent
	sess  *session.Session
	opts  Options
	stop  func() // runs shutdown once, early or when the agent's scope ends

	mu     sync.Mutex
	closed error
	// last is the seq of the last durable event the Hub recorded.
	last int64
	// recent holds the durable events first..last, at most 2*Window of
	// them, trimmed to Window at once so trimming copies rarely.
	recent []session.Event
	first  int64
	flight *flight
	// notices are the last Options.Notices notices, oldest first.
	notices  []Notice
	noticeID int64
	clients  map[*Client]struct{}
	named    int
	// approvers counts the attached clients that answer approvals;
	// unapprove detaches the Hub from the approval service.
	approvers int
	unapprove func()
	// grace ends the ApproverGrace the Hub is in: attached to the
	// approval service with no approving client.
	grace     *time.Timer
	question  *question
	questions int64
	// settled remembers the last question closed, to say why an Answer to
	// it came too late.
	settled Settled
}

// flight is the message being streamed.
type flight struct {
	id         string
	turn, step int
	asm        llm.Assembler
	n          int
}

// New starts a Hub for agent: it listens to the agent's session/event and
// agent/stream-chunk until Close or until the agent's scope is disposed.
func New(agent agents.Agent, opts Options) (*Hub, error) {
	if agent == nil || agent.Session() == nil || agent.Context() == nil {
		return nil, errs.New(errs.InvalidArgument, "live.New: pass a live agent with a session and a scope")
	}
	if opts.Window <= 0 {
		opts.Window = defaultWindow
	}
	if opts.Buffer <= 0 {
		opts.Buffer = defaultBuffer
	}
	if opts.Notices <= 0 {
		opts.Notices = defaultNotices
	}
	sess := agent.Session()
	if opts.Load == nil {
		opts.Load = memoryLoader(sess)
	}
	if opts.Approvals == nil {
		if s, err := approval.Key.Get(agent.Context()); err == nil {
			opts.Approvals = s
		}
	}
	h := &Hub{agent: agent, sess: sess, opts: opts, clients: map[*Client]struct{}{}}
	// The Hub starts a window's worth back: a resumed log can be long,
	// and older events are the loader's.
	if n := sess.Durable(); n > int64(opts.Window) {
		h.last = n - int64(opts.Window)
	}
	at := agent.Context()
	offEvents, err := session.EventDurable.On(at, h.onDurable)
	if err != nil {
		return nil, errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf("live: cannot listen to the session of agent %q", agent.ID()))
	}
	offChunks, err := agentloop.EventStreamChunk.On(at, h.onChunk)
	if err != nil {
		offEvents()
		return nil, errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf("live: cannot listen to the stream of agent %q", agent.ID()))
	}
	offTools, err := tools.EventExecute.On(at, h.onExecute)
	if err != nil {
		offEvents()
		offChunks()
		return nil, errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf("live: cannot follow the tool calls of agent %q", agent.ID()))
	}
	stop, err := at.OnDispose("live hub", func() error {
		offEvents()
		offChunks()
		offTools()
		h.shutdown(errs.New(HubClosed, fmt.Sprintf("agent %q was disposed; its session is no longer live", agent.ID())))
		return nil
	})
	if err != nil {
		offEvents()
		offChunks()
		offTools()
		return nil, err
	}
	h.stop = stop
	// Events made durable before the listeners were on are read from the
	// session; the listeners drop what this already recorded.
	h.mu.Lock()
	if d := sess.Durable(); d > h.last {
		h.catchUp(d)
	}
	h.mu.Unlock()
	return h, nil
}

// memoryLoader reads from the session's in-memory log.
func memoryLoader(s *session.Session) Loader {
	return func(_ stdctx.Context, from, to int64) ([]session.Event, error) {
		evs := s.Events(from)
		if n := to - from + 1; int64(len(evs)) > n {
			evs = evs[:n]
		}
		return evs, nil
	}
}

// Close closes every client with LIVE_HUB_CLOSED, withdraws the Hub as
// approval answerer and stops listening. It is idempotent.
func (h *Hub) Close() {
	h.shutdown(errs.New(HubClosed, fmt.Sprintf("the live hub of agent %q was closed: its session is closed", h.agent.ID())))
	h.stop()
}

// LastSeq returns the seq of the last durable event the Hub has seen.
func (h *Hub) LastSeq() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

func (h *Hub) shutdown(why error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed != nil {
		return
	}
	h.closed = why
	for c := range h.clients {
		h.drop(c, why)
	}
	h.endGraceLocked()
	h.flight = nil
}

// onDurable records the events a checkpoint made durable. An event is
// sent only once stored: a crash can lose the step in flight, and a client
// must never have seen an event under a seq that the log, resumed
// elsewhere, gives to another.
func (h *Hub) onDurable(_ stdctx.Context, f session.Flush) error {
	if f.Session != h.sess {
		return nil
	}
	yieldTo(h.durable(f.Seq))
	return nil
}

// durable records the events up to seq not recorded yet; it says whether a
// caught-up client got an update.
func (h *Hub) durable(seq int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed != nil || seq <= h.last {
		// Checkpoints racing may be heard out of order.
		return false
	}
	return h.catchUp(seq)
}

// catchUp records the session's events after h.last up to to (0: all);
// the caller holds mu. It says whether a caught-up client got one.
func (h *Hub) catchUp(to int64) bool {
	caughtUp := false
	for _, e := range h.sess.Events(h.last + 1) {
		if to > 0 && e.Seq > to {
			break
		}
		caughtUp = h.record(e) || caughtUp
	}
	return caughtUp
}

// record keeps e in the window, ends the streamed message it completes and
// sends it to the clients; the caller holds mu. It says whether a
// caught-up client got it.
func (h *Hub) record(e session.Event) bool {
	if len(h.recent) == 0 {
		h.first = e.Seq
	}
	h.recent = append(h.recent, e)
	if len(h.recent) >= 2*h.opts.Window {
		drop := len(h.recent) - h.opts.Window
		n := copy(h.recent, h.recent[drop:])
		clear(h.recent[n:])
		h.recent = h.recent[:n]
		h.first += int64(drop)
	}
	h.last = e.Seq
	switch e.Type {
	case session.AssistantMessage, session.StepEnd, session.TurnEnd:
		// The log holds the message now; a stream aborted before its
		// message was recorded ends with its step or turn.
		h.flight = nil
	}
	if len(h.clients) == 0 {
		return false
	}
	// Trimming the window moves its elements: clients share a copy.
	cp := e
	return h.broadcast(Update{Kind: KindEvent, Seq: e.Seq, Event: &cp}, false)
}

// onChunk tracks the message in flight and passes the chunk on.
func (h *Hub) onChunk(_ stdctx.Context, sc agentloop.StreamChunk) error {
	yieldTo(h.chunk(sc))
	return nil
}

// chunk tracks the message in flight and queues the chunk for the
// clients; it says whether a caught-up client got it.
func (h *Hub) chunk(sc agentloop.StreamChunk) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed != nil {
		return false
	}
	f := h.flight
	if f == nil || f.id != sc.MessageID {
		f = &flight{id: sc.MessageID, turn: sc.Turn, step: sc.Step}
		h.flight = f
	}
	idx := f.n
	f.n++
	f.asm.Add(sc.Chunk)
	if len(h.clients) == 0 {
		return false
	}
	return h.broadcast(Update{Kind: KindChunk, Chunk: Chunk{MessageID: sc.MessageID, Index: idx, Turn: sc.Turn, Step: sc.Step, Chunk: sc.Chunk}}, false)
}

// onExecute tells the clients that a tool call starts running (an editor
// marks it in progress), then runs it.
func (h *Hub) onExecute(ctx stdctx.Context, x tools.Execution, next tools.ExecuteNext) (tools.Result, error) {
	h.mu.Lock()
	if h.closed == nil && len(h.clients) > 0 {
		h.broadcast(Update{Kind: KindToolStart, ToolStart: &ToolStart{CallID: x.Call.ID, Name: x.Call.Name, Turn: h.turn()}}, false)
	}
	h.mu.Unlock()
	return next.Call(ctx, x)
}

// turn is the turn of the last durable event; the caller holds mu.
func (h *Hub) turn() int {
	if n := len(h.recent); n > 0 {
		return h.recent[n-1].Turn
	}
	return 0
}

// yieldTo yields the processor when an update went to a caught-up client
// (one that had nothing queued, so is waiting in Next or about to), which
// the agent's goroutine has just made runnable. The runtime puts that
// goroutine in this P's next slot: without the yield it waits for another
// P to wake up and steal it, while the agent goes on with its next chunk
// or its session's append and fsync. Profiled on a 2-CPU VM, that wait
// was most of the time from a model's first chunk to an ACP client's
// (70-110 µs); with the yield the client runs within a few µs. A client
// with a backlog is not yielded to: it takes what the agent adds
// meanwhile in one go (acp's pump coalesces it).
func yieldTo(caughtUp bool) {
	if caughtUp {
		runtime.Gosched()
	}
}

// snapshot returns the message in flight; the caller holds mu.
func (h *Hub) snapshot() *Snapshot {
	f := h.flight
	if f == nil {
		return nil
	}
	m := f.asm.Message()
	m.ID = f.id
	return &Snapshot{MessageID: f.id, Turn: f.turn, Step: f.step, Next: f.n, Message: m}
}

// Notice publishes n to every attached client and keeps it for clients
// that attach later (the last Options.Notices). It returns n as sent,
// with its ID, AfterSeq and Time set.
func (h *Hub) Notice(n Notice) Notice {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noticeID++
	n.ID = h.noticeID
	n.AfterSeq = h.last
	if n.Time.IsZero() {
		n.Time = time.Now()
	}
	if len(h.notices) == h.opts.Notices {
		copy(h.notices, h.notices[1:])
		h.notices = h.notices[:len(h.notices)-1]
	}
	h.notices = append(h.notices, n)
	if h.closed == nil {
		cp := n
		h.broadcast(Update{Kind: KindNotice, Notice: &cp}, false)
	}
	return n
}

// broadcast queues u for every client (only approving ones when
// approvers); the caller holds mu. It says whether a client that had
// nothing queued got it.
func (h *Hub) broadcast(u Update, approvers bool) bool {
	caughtUp := false
	for c := range h.clients {
		if approvers && !c.approvals {
			continue
		}
		ok, idle := c.push(u)
		if !ok {
			h.drop(c, c.overflow())
		}
		caughtUp = caughtUp || idle
	}
	return caughtUp
}
