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
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/sessions"
)

// Closed is the code of a delivery attempted after Close began.
const Closed errs.Code = "UNATTENDED_CLOSED"

// ForeignSession is the code of a delivery whose session exists and
// belongs to another tenant than the source's (a tenant opened a session
// under the source's id first, or the config names another's session).
const ForeignSession errs.Code = "UNATTENDED_FOREIGN_SESSION"

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
	Source sessions.Source
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
	// recorded is set before Done closes: the log held the request's
	// outcome when its turn was followed to its end.
	recorded *atomic.Bool
}

// Recorded reports, once Done is closed, whether the session's log holds
// the outcome of the delivery's request (the caller may forget the
// delivery: a restart finds it there).
func (d Delivery) Recorded() bool { return d.recorded != nil && d.recorded.Load() }

// Runner delivers prompts and owns the goroutines that follow their turns.
type Runner struct {
	sessions sessions.Service
	log      *slog.Logger

	// ctx ends when Close gives up waiting: the turns still running are
	// cancelled.
	ctx    stdctx.Context
	cancel stdctx.CancelFunc
	turns  sync.WaitGroup

	mu     sync.Mutex
	closed bool
}

// New returns a runner delivering through svc.
func New(svc sessions.Service, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{sessions: svc, log: log}
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
	// A session it opens is its principal's tenant's; one it resumes
	// keeps the tenant its log has.
	return sessions.OpenOptions{Agent: t.Agent, Presets: t.Presets, Source: t.Source, Tenant: t.Source.Principal.Tenant}
}

// deliverFresh opens a session for this one prompt — under t.Own, resumed
// when stored, or a fresh id — and closes it after the turn.
func (r *Runner) deliverFresh(ctx stdctx.Context, t Target, req sessions.PromptRequest, started *bool) (Delivery, error) {
	o := r.openOptions(t)
	o.SessionID = t.Own
	if err := r.mine(ctx, o.SessionID, o.Tenant); err != nil {
		return Delivery{}, err
	}
	in, err := r.sessions.Ensure(ctx, sessions.EnsureOptions{OpenOptions: o})
	if err != nil {
		return Delivery{}, err
	}
	turn, err := r.sessions.Prompt(ctx, in.ID, req)
	if err != nil {
		return Delivery{}, errors.Join(err, r.sessions.Close(stdctx.WithoutCancel(ctx), in.ID))
	}
	done, rec := make(chan struct{}), new(atomic.Bool)
	*started = true
	go r.follow(turn, done, rec, true)
	return Delivery{Session: in.ID, MessageID: turn.MessageID, Done: done, recorded: rec}, nil
}

// deliverFixed prompts the target's own session: joined when open here,
// else resumed, else created under its id; it stays open (Ensure keeps it
// running) until the server closes it. A session closed between the
// ensure and the prompt is ensured again, once.
func (r *Runner) deliverFixed(ctx stdctx.Context, t Target, req sessions.PromptRequest, started *bool) (Delivery, error) {
	o := r.openOptions(t)
	o.SessionID, o.KeepRunning = t.Session, true
	for attempt := 0; ; attempt++ {
		if err := r.mine(ctx, o.SessionID, o.Tenant); err != nil {
			return Delivery{}, err
		}
		in, err := r.sessions.Ensure(ctx, sessions.EnsureOptions{OpenOptions: o})
		if err != nil {
			return Delivery{}, err
		}
		turn, err := r.sessions.Prompt(ctx, in.ID, req)
		if (errs.HasCode(err, sessions.Closed) || errs.HasCode(err, sessions.NotFound)) && attempt == 0 {
			continue
		}
		if err != nil {
			return Delivery{}, err
		}
		done, rec := make(chan struct{}), new(atomic.Bool)
		*started = true
		go r.follow(turn, done, rec, false)
		return Delivery{Session: in.ID, MessageID: turn.MessageID, Done: done, recorded: rec}, nil
	}
}

// mine refuses session id unless it is missing or tenant's: any tenant
// may open a session under a free id, a source's fixed session's among
// them, and a delivery into it would hand the source's payloads to that
// tenant (and, for a source with a tenant, the squatter's history to the
// source's tenant). The copy that is open says first, then the stored log,
// as for the API's callers.
func (r *Runner) mine(ctx stdctx.Context, id, tenant string) error {
	if id == "" {
		return nil
	}
	owner, exists, err := sessions.Owner(ctx, r.sessions, id)
	if err != nil {
		return err
	}
	if exists && owner != tenant {
		who := "an operator's"
		if tenant != "" {
			who = "tenant " + strconv.Quote(tenant) + "'s"
		}
		return errs.New(ForeignSession, fmt.Sprintf("session %q is not %s, whose source delivers into it; delete that session or give the source another session id", id, who))
	}
	return nil
}

// follow waits for the recorded outcome of the turn, logs how it ended,
// waits until the session is idle and closes a fresh session. Close's
// cancel ends the wait by cancelling the turn.
func (r *Runner) follow(turn sessions.Turn, done chan struct{}, recorded *atomic.Bool, fresh bool) {
	defer r.turns.Done()
	defer close(done)
	res, err := turn.Wait(r.ctx)
	if err == nil {
		err = r.sessions.Idle(r.ctx, turn.Session)
	}
	if r.ctx.Err() != nil {
		// Shutting down past its deadline: the turn is cancelled and
		// the session still closed below, flushed.
		if cerr := r.sessions.Cancel(stdctx.Background(), turn.Session); cerr != nil && !errs.HasCode(cerr, sessions.Closed) && !errs.HasCode(cerr, sessions.NotFound) {
			r.log.Warn("cancelling an unattended turn failed", "session", turn.Session, "request_id", turn.RequestID, "error", cerr)
		}
		res, err = turn.Wait(stdctx.Background())
	}
	// Wait returns the outcome once the log holds it.
	recorded.Store(err == nil)
	reason, why := "not-run", ""
	switch {
	case err != nil:
		reason, why = "unknown", err.Error()
	case res.End != nil:
		reason, why = res.End.Reason, res.End.Error
	}
	r.log.Info("unattended turn ended", "session", turn.Session, "request_id", turn.RequestID, "message_id", turn.MessageID,
		"reason", reason, "error", why)
	if fresh {
		if err := r.sessions.Close(stdctx.Background(), turn.Session); err != nil && !errs.HasCode(err, sessions.NotFound) {
			r.log.Error("closing the session of an unattended delivery failed", "session", turn.Session, "request_id", turn.RequestID, "error", err)
		}
	}
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
