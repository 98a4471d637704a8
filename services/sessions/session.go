package sessions

import (
	stdctx "context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// Cancelled is the cause a turn ends with when a client cancels it.
const Cancelled errs.Code = "SESSION_CANCELLED"

type state uint8

const (
	stateOpen state = iota
	stateClosing
	stateClosed
)

// Session is one open session: the record that holds its agent's handle.
// Entry points prompt, steer, cancel, attach and close through it; only
// the session disposes the agent.
type Session struct {
	c           *Controller
	id, agentID string
	agent       string
	handle      *agents.Handle
	hub         Hub
	source      agentcontroller.Source
	keepRunning bool

	// closeMu makes closes take turns, so a retry after a failed dispose
	// waits for the one in flight.
	closeMu sync.Mutex
	// deliveries is read-held by every delivery while it is admitted and
	// queued, and write-held by a rewind: a prompt sent during a rewind
	// waits for it, and a rewind does not start while one is admitted.
	deliveries sync.RWMutex

	mu     sync.Mutex
	state  state
	owners int
	// held is the opener's own ownership, which Detach gives up.
	held     bool
	outcomes ring

	// watch follows the log for Wait; made by the first Wait (most
	// sessions of a server are never waited on), under mu.
	watch *watch
	// The log's first event time and first prompt's title, once known.
	created time.Time
	title   string
	titled  bool

	// goal drives the session's goal (goaldrive.go); nil until the
	// session has one.
	goal *goalDriver
}

func newSession(c *Controller, spec Spec, o OpenOptions, h *agents.Handle) *Session {
	src := o.Source
	if src.Kind == "" {
		src.Kind = agentcontroller.SourceUser
	}
	return &Session{c: c, id: spec.SessionID, agentID: spec.AgentID, agent: spec.Agent, handle: h, source: src,
		keepRunning: o.KeepRunning, owners: 1, held: true}
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// AgentID returns the id of the session's agent.
func (s *Session) AgentID() string { return s.agentID }

// AgentName returns the configured agent (or template) the session runs.
func (s *Session) AgentName() string { return s.agent }

// Log returns the session's in-memory log: local-only, for the cluster's
// lease and fencing checks, which ask the store's lease of this copy. It
// is not on the Service: another host's session has no log here.
func (s *Session) Log() *session.Session { return s.handle.Agent.Session() }

// Open reports whether the session still takes prompts.
func (s *Session) Open() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == stateOpen
}

// PromptRequest is one prompt or steering message of a client.
type PromptRequest struct {
	// RequestID makes a retry safe: the same id returns the original
	// message id and delivers nothing twice. Clients that may retry (a
	// dropped connection) must set it.
	RequestID string
	Content   string
	// Parts makes the prompt multimodal: images and files with their
	// bytes in Data (see llm.Part). They are stored in the attachments
	// service before admission and reach the log as references; a
	// delivery that does not enter the inbox leaves nothing stored.
	// Content, when set too, is the text before them.
	Parts []llm.Part
	// Source is who sends it; zero means the session's default source.
	Source agentcontroller.Source
}

// Prompt queues a message for a turn of the session's agent, through the
// agent controller's admission, and returns the message id. A refusal
// returns a PromptRejected (or, when the agent is gone, Closed) error and is
// kept as an Outcome for clients that attach later.
func (s *Session) Prompt(ctx stdctx.Context, r PromptRequest) (string, error) {
	return s.deliver(ctx, agentcontroller.Followup, r)
}

// Steer hands a message to the running turn, like Prompt otherwise.
func (s *Session) Steer(ctx stdctx.Context, r PromptRequest) (string, error) {
	return s.deliver(ctx, agentcontroller.Steer, r)
}

func (s *Session) deliver(ctx stdctx.Context, mode agentcontroller.Mode, r PromptRequest) (id string, err error) {
	if !s.Open() {
		return "", closedErr(s.id)
	}
	src := r.Source
	if src.Kind == "" {
		src = s.source
	}
	s.deliveries.RLock()
	defer s.deliveries.RUnlock()
	if telemetry.Enabled() {
		var span trace.Span
		ctx, span = startInput(ctx, s.id, src, r.RequestID, mode)
		defer func() { telemetry.End(span, err) }()
	}
	req := agentcontroller.Request{Mode: mode, Source: src, RequestID: r.RequestID, Content: r.Content}
	if len(r.Parts) > 0 {
		req.Prepare = s.prepareParts(r)
	}
	id, err = s.c.deliver.Deliver(ctx, s.handle.Agent, req)
	if err == nil {
		return id, nil
	}
	err = DeliveryError(s.id, r.RequestID, err)
	if o, ok := outcomeOf(s.id, r.RequestID, err); ok {
		s.record(o)
	}
	return "", err
}

// record keeps o and tells the agent's scope; a scope already disposed
// (the session closed meanwhile) has nobody left to tell.
func (s *Session) record(o Outcome) {
	o.AgentID = s.handle.Agent.ID()
	s.mu.Lock()
	s.outcomes.add(o)
	s.mu.Unlock()
	_ = EventOutcome.Emit(stdctx.Background(), s.handle.Agent.Context(), o)
}

// Outcomes returns the last outcomes of the session's requests, oldest
// first: what a client that re-attaches reads to learn about its prompts.
func (s *Session) Outcomes() []Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outcomes.list()
}

// Cancel drops what the agent has queued — in its inbox, and on its way
// there through admission — ends its current turn and waits until it is
// idle or ctx ends. Each message it drops is recorded as message/dropped
// with who cancelled.
func (s *Session) Cancel(ctx stdctx.Context) error {
	if !s.Open() {
		return closedErr(s.id)
	}
	by := ActorOf(ctx)
	if by == "" {
		by = "a client of the session"
	}
	cause := errs.New(Cancelled, fmt.Sprintf("%s cancelled the turn of session %q", by, s.id))
	// The agent records who cancelled on every message the cancel drops.
	cause.Details = map[string]any{"by": by}
	// Withdraw first: a message clearing admission meanwhile lands in
	// the inbox the agent's cancel then empties.
	s.c.deliver.Withdraw(s.handle.Agent, cause)
	s.handle.Agent.Cancel(cause)
	return s.handle.Agent.WhenIdle(ctx)
}

// AttachOptions describe a client attaching to the session.
type AttachOptions struct {
	// AfterSeq is the last durable sequence number the client has; the
	// hub replays the events after it.
	AfterSeq int64 `json:"after_seq,omitempty"`
	// AfterNotice is the id of the last notice the client holds; the hub
	// replays the retained notices after it.
	AfterNotice int64 `json:"after_notice,omitempty"`
	// Approvals makes the client an answerer of the agent's approval
	// questions (first answer wins among approving clients).
	Approvals bool `json:"approvals,omitempty"`
	// Name identifies the client to the others ("answered by Name").
	Name string `json:"name,omitempty"`
	// FromEnd starts the stream after the last durable event, whatever
	// AfterSeq says: for a client that wants what happens from now on.
	FromEnd bool `json:"from_end,omitempty"`
}

// Attachment is one attached client: an owner of the session.
type Attachment struct {
	s      *Session
	client HubClient
	once   sync.Once
	err    error
}

// Client returns the live stream, nil when the controller has no hub.
func (a *Attachment) Client() HubClient { return a.client }

// Detach ends the client's stream and its ownership; the last owner
// leaving closes the session unless it keeps running. It returns the
// close's error, once.
func (a *Attachment) Detach(ctx stdctx.Context) error {
	a.once.Do(func() {
		if a.client != nil {
			a.client.Close()
		}
		a.err = a.s.release(ctx)
	})
	return a.err
}

// Attach makes a client an owner of the session and, with a hub, starts
// its event stream.
func (s *Session) Attach(ctx stdctx.Context, o AttachOptions) (*Attachment, error) {
	s.mu.Lock()
	if s.state != stateOpen {
		s.mu.Unlock()
		return nil, closedErr(s.id)
	}
	s.owners++
	s.mu.Unlock()
	a := &Attachment{s: s}
	if s.hub != nil {
		client, err := s.hub.Attach(ctx, o)
		if err != nil {
			return nil, errors.Join(err, s.release(ctx))
		}
		a.client = client
	}
	return a, nil
}

// Detach gives up the ownership Open or Resume gave its caller, once; see
// Attachment.Detach.
func (s *Session) Detach(ctx stdctx.Context) error {
	s.mu.Lock()
	held := s.held
	s.held = false
	s.mu.Unlock()
	if !held {
		return nil
	}
	return s.release(ctx)
}

// release drops one owner and closes the session when it was the last.
func (s *Session) release(ctx stdctx.Context) error {
	s.mu.Lock()
	s.owners--
	last := s.owners == 0 && !s.keepRunning && s.state == stateOpen
	if last {
		// Closing from here on: a client attaching now is refused rather
		// than handed a session about to go.
		s.state = stateClosing
	}
	s.mu.Unlock()
	if !last {
		return nil
	}
	return s.Close(ctx)
}

// Close disposes the session's agent — loop stopped, quiescence awaited,
// closing turn/end written, agent unregistered, in-memory session
// removed — then its hub, and forgets the record. Sibling sessions are
// untouched. A dispose cut short by ctx returns its error and leaves the
// session closing (prompts are refused); calling Close again retries.
func (s *Session) Close(ctx stdctx.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.mu.Lock()
	if s.state == stateClosed {
		s.mu.Unlock()
		return nil
	}
	s.state = stateClosing
	s.mu.Unlock()
	if ctx == nil {
		ctx = stdctx.Background()
	}
	// The goal stops sending before the agent goes.
	s.mu.Lock()
	g := s.goal
	s.mu.Unlock()
	if g != nil {
		g.close()
	}
	// Found before the dispose ends the agent's scope.
	store := s.storeOrNil()
	disposed := s.handle.Dispose(ctx)
	if disposed != nil && !errs.Has(disposed, session.SessionLocked, session.ReasonFenced) {
		return disposed
	}
	// Disposed, or fenced: the agent let its session go to the writer
	// that owns it now, and what it had not written is dropped.
	var err error
	if s.hub != nil {
		err = s.hub.Close()
	}
	s.mu.Lock()
	s.state = stateClosed
	w := s.watch
	s.mu.Unlock()
	if w != nil {
		w.closed()
	}
	s.c.forget(s)
	return errors.Join(disposed, err, releaseUnpersisted(store, s.id))
}

// abandon disposes the agent of a session that was never published,
// because its owner went away while it opened; why is returned with what
// the dispose hit.
func (s *Session) abandon(why error) error {
	disposeErr := s.handle.Dispose(stdctx.Background())
	var hubErr error
	if s.hub != nil {
		hubErr = s.hub.Close()
	}
	return errors.Join(why, disposeErr, hubErr)
}
