// Package unattended delivers the prompts of sources nobody attends — the
// webhooks and schedules of dsh serve — through the session controller, and
// follows each turn to its end in the background, so the caller answers at
// once and shutdown can wait for, or cancel, what is still running.
//
// A target names a session (resumed, or created under that id, and kept
// open across deliveries) or none (a fresh session per delivery, closed
// once its turn ends). Delivery goes through Session.Prompt only, hence
// through the agent controller's admission: a plugin that holds or refuses
// messages governs these sources as it governs a person's.
package unattended

import (
	stdctx "context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// Closed is the code of a delivery attempted after Close began.
const Closed errs.Code = "UNATTENDED_CLOSED"

// Target is where a source's prompts go.
type Target struct {
	// Agent is the configured agent; Presets are mounted after its own.
	Agent   string
	Presets []string
	// Session, when set, is the one session every delivery goes to;
	// empty opens a new session per delivery.
	Session string
	// Own, with Session empty, names the session of this one delivery:
	// resumed when the store has it (a redelivery then finds its request
	// id in the log and runs nothing), else opened under this id. Empty
	// opens a session under a fresh id.
	Own string
	// Source is who sends: its kind makes the turn unattended.
	Source agentcontroller.Source
}

// Delivery is a prompt that entered a session's inbox.
type Delivery struct {
	Session   string
	MessageID string
	// Done is closed when the session's agent is idle again: the turn that
	// took the message ended (with whatever was queued behind it), or a
	// cancel dropped it, or the session closed. A fresh session is closed
	// by then.
	Done <-chan struct{}
}

// Runner delivers prompts and owns the goroutines that follow their turns.
type Runner struct {
	sessions *sessions.Controller
	log      *slog.Logger

	// ctx ends when Close gives up waiting: the turns still running are
	// cancelled.
	ctx    stdctx.Context
	cancel stdctx.CancelFunc
	turns  sync.WaitGroup

	// openMu makes the opens of one fixed session take turns, so two
	// deliveries at once do not both try to create it.
	openMu sync.Mutex

	mu     sync.Mutex
	closed bool
}

// New returns a runner delivering through ctl.
func New(ctl *sessions.Controller, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{sessions: ctl, log: log}
	r.ctx, r.cancel = stdctx.WithCancel(stdctx.Background())
	return r
}

// Deliver opens the target's session, prompts it with req and follows the
// turn in the background. A refusal by admission comes back as the session
// controller's SESSION_PROMPT_REJECTED error (sessions.RejectionOf), and a
// fresh session opened for it is closed again.
func (r *Runner) Deliver(ctx stdctx.Context, t Target, req sessions.PromptRequest) (Delivery, error) {
	if !r.enter() {
		return Delivery{}, errs.New(Closed, "the unattended source is shutting down and delivers nothing more; retry once dsh serve runs again")
	}
	started := false
	defer func() {
		if !started {
			r.turns.Done()
		}
	}()
	ctx, stop := r.bound(ctx)
	defer stop()
	req.Source = t.Source
	if t.Session == "" {
		d, err := r.deliverFresh(ctx, t, req, &started)
		return d, err
	}
	return r.deliverFixed(ctx, t, req, &started)
}

// enter counts a delivery in, unless Close began.
func (r *Runner) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.turns.Add(1)
	return true
}

// bound is ctx, also ended when the runner cancels its turns.
func (r *Runner) bound(ctx stdctx.Context) (stdctx.Context, func()) {
	b, cancel := stdctx.WithCancel(ctx)
	stop := stdctx.AfterFunc(r.ctx, cancel)
	return b, func() { stop(); cancel() }
}

func (r *Runner) openOptions(t Target) sessions.OpenOptions {
	return sessions.OpenOptions{Agent: t.Agent, Presets: t.Presets, Source: t.Source}
}

// deliverFresh opens a session for this one prompt; it closes after the
// turn.
func (r *Runner) deliverFresh(ctx stdctx.Context, t Target, req sessions.PromptRequest, started *bool) (Delivery, error) {
	s, err := r.own(ctx, t)
	if err != nil {
		return Delivery{}, err
	}
	msgID, err := s.Prompt(ctx, req)
	if err != nil {
		return Delivery{}, errors.Join(err, s.Detach(stdctx.WithoutCancel(ctx)))
	}
	done := make(chan struct{})
	*started = true
	go r.follow(s, req.RequestID, msgID, done, true)
	return Delivery{Session: s.ID(), MessageID: msgID, Done: done}, nil
}

// own opens the session of one delivery: under a fresh id, or under
// t.Own, resuming it when it is stored.
func (r *Runner) own(ctx stdctx.Context, t Target) (*sessions.Session, error) {
	o := r.openOptions(t)
	if t.Own == "" {
		return r.sessions.Open(ctx, o)
	}
	s, err := r.sessions.Resume(ctx, t.Own, o)
	if errs.HasCode(err, session.NotFound) || errs.HasCode(err, session.NoPersistence) {
		o.SessionID = t.Own
		return r.sessions.Open(ctx, o)
	}
	return s, err
}

// deliverFixed prompts the target's own session, opening it when it is
// not open here; a session closed between the two is opened again, once.
func (r *Runner) deliverFixed(ctx stdctx.Context, t Target, req sessions.PromptRequest, started *bool) (Delivery, error) {
	for attempt := 0; ; attempt++ {
		s, err := r.fixed(ctx, t)
		if err != nil {
			return Delivery{}, err
		}
		msgID, err := s.Prompt(ctx, req)
		if errs.HasCode(err, sessions.Closed) && attempt == 0 && !s.Open() {
			continue
		}
		if err != nil {
			return Delivery{}, err
		}
		done := make(chan struct{})
		*started = true
		go r.follow(s, req.RequestID, msgID, done, false)
		return Delivery{Session: s.ID(), MessageID: msgID, Done: done}, nil
	}
}

// fixed returns the target's session open: the one open here, else the
// persisted one resumed, else a new one under its id. It stays open when
// nobody is attached (KeepRunning) until the server closes it.
func (r *Runner) fixed(ctx stdctx.Context, t Target) (*sessions.Session, error) {
	r.openMu.Lock()
	defer r.openMu.Unlock()
	if s, ok := r.sessions.Get(t.Session); ok && s.Open() {
		return s, nil
	}
	o := r.openOptions(t)
	o.KeepRunning = true
	s, err := r.sessions.Resume(ctx, t.Session, o)
	switch {
	case err == nil:
	case errs.HasCode(err, session.NotFound), errs.HasCode(err, session.NoPersistence):
		// Nothing to resume: the session starts here, under its id
		// (without persistence it lives as long as dsh serve).
		o.SessionID = t.Session
		if s, err = r.sessions.Open(ctx, o); err != nil {
			return nil, err
		}
	case errs.Has(err, session.SessionLocked, sessions.ReasonOpenHere):
		// Another entry point opened it meanwhile.
		if s, ok := r.sessions.Get(t.Session); ok {
			return s, nil
		}
		return nil, err
	default:
		return nil, err
	}
	// KeepRunning holds it open; the runner need not stay an owner.
	if err := s.Detach(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// follow waits until the agent has finished with the message, logs how
// its turn ended, and closes a fresh session. Close's cancel ends the
// wait by cancelling the turn.
func (r *Runner) follow(s *sessions.Session, requestID, msgID string, done chan struct{}, fresh bool) {
	defer r.turns.Done()
	defer close(done)
	agent := s.UnportedAgent()
	err := agent.WhenIdle(r.ctx)
	if err != nil {
		// Shutting down past its deadline: the turn is cancelled and
		// the session still closed below, flushed.
		if cerr := s.Cancel(stdctx.Background()); cerr != nil && !errs.HasCode(cerr, sessions.Closed) {
			r.log.Warn("cancelling an unattended turn failed", "session", s.ID(), "request_id", requestID, "error", cerr)
		}
	}
	end := turnEndOf(agent.Session(), msgID)
	r.log.Info("unattended turn ended", "session", s.ID(), "request_id", requestID, "message_id", msgID,
		"reason", end.Reason, "error", end.Error)
	if fresh {
		if err := s.Detach(stdctx.Background()); err != nil {
			r.log.Error("closing the session of an unattended delivery failed", "session", s.ID(), "request_id", requestID, "error", err)
		}
	}
}

// turnEndOf finds the turn/end of the turn that took message msgID; the
// zero Event when the message never ran (dropped by a cancel).
func turnEndOf(log *session.Session, msgID string) session.Event {
	if log == nil {
		return session.Event{}
	}
	turn := -1
	for _, e := range log.Events(1) {
		switch {
		case e.Message != nil && e.Message.ID == msgID && (e.Type == session.UserMessage || e.Type == session.SteeringMessage):
			turn = e.Turn
		case e.Type == session.TurnEnd && e.Turn == turn:
			return e
		}
	}
	return session.Event{Reason: "not-run"}
}

// Close refuses new deliveries and waits until every turn followed has
// ended; when ctx ends first, the turns are cancelled, and Close still
// waits for their sessions to close before it returns ctx's error.
func (r *Runner) Close(ctx stdctx.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	idle := make(chan struct{})
	go func() {
		r.turns.Wait()
		close(idle)
	}()
	select {
	case <-idle:
		r.cancel()
		return nil
	case <-ctx.Done():
	}
	r.cancel()
	<-idle
	return fmt.Errorf("unattended turns still ran when the shutdown deadline passed; they were cancelled: %w", stdctx.Cause(ctx))
}
