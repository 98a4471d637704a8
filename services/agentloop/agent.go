package agentloop

import (
	stdctx "context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/google/uuid"
)

// ReactLoopAgent is the agent the loop runs: ask the model, run the tools it
// asks for, repeat until the turn is done. An idle agent holds no goroutine;
// a driver goroutine runs while there is work and exits when there is none.
type ReactLoopAgent struct {
	loop  *Loop
	id    string
	scope *dshctx.Context
	sess  *session.Session
	opts  agents.Options
	// telPrincipal is the principal's metric attribute, made once per
	// principal; only the driver goroutine touches it.
	telPrincipal struct {
		p llm.Principal
		s string
	}
	// workspace is opts.Workspace made absolute, or the directory dsh
	// was started in; every tool call carries it.
	workspace string
	// unattended: a message of the running turn came from a source no
	// person watches. Set and read by the driver only.
	unattended bool
	// stopped is the agent/stop answer that ended the running turn, if
	// one did. Set and read by the driver only.
	stopped Stop
	// sources are who is behind the running turn's inputs, each distinct
	// provenance once, in the order its first message arrived; every tool
	// call of the turn carries them to the approval stage.
	sources []llm.Provenance
	// parts: the session holds a message with parts, so model requests
	// need their bytes read from the attachments store; a text-only
	// session never looks. Set by the driver, read by the driver.
	parts atomic.Bool

	mu      sync.Mutex
	inbox   Inbox
	status  agents.Status
	driving bool
	// busy: the driver has taken messages for a turn and not come back
	// for more, so a message queued now waits for that turn to end and
	// is recorded as queued meanwhile (see enqueue).
	busy     bool
	turn     int
	disposed bool
	// cancelled marks the current or next turn as cancelled; the driver
	// resets it once per iteration so it never reaches a later message.
	cancelled bool
	// abortStep cancels the step in flight; aborting records why.
	abortStep stdctx.CancelFunc
	// turnCtx carries the running turn's span, for lines logged about
	// the turn from outside it (a cancel); nil between turns.
	turnCtx  stdctx.Context
	aborting bool
	// cancelBy is who sent the last cancel; drops are the messages taken
	// from the inbox that the driver has still to record as dropped.
	cancelBy string
	drops    []dropped
	// refusals are outcome events of messages that never entered the
	// inbox (refused, expired, withdrawn), each with the decision record
	// that led to it, waiting to be appended (see RecordEvent).
	refusals []handedOutcome
	// parked are the decision records whose outcome event is still to
	// come (session.Decided.WithOutcome), by request id.
	parked map[string]session.Decision
	// decisions are decision records the stages handed over, waiting for
	// the driver to append them (see RecordDecision).
	decisions []session.Decision
	// records are events plugins handed over through session/record (a
	// tool call's checkpoint, a plan), waiting for the driver to append
	// them after the decisions, before the next tool result or prompt.
	records []session.Event
	idle    chan struct{} // closed when the driver and the outcome writer are gone
	torn    bool
	// sealed: finish took what was handed over last and wrote it; what
	// comes later is refused, as no log will hold it.
	sealed bool
	// pen is held by whoever appends to the session while the agent
	// lives: the driver, which puts it down while it waits on the model's
	// stream or on tool calls, or in those gaps the outcome writer (see
	// writeOutcomes), or finish. Session.Append wants its callers in
	// line; a one-slot channel rather than a mutex, so finish can wait
	// for it bounded by its ctx.
	pen chan struct{}
	// writing: an outcome writer runs; writers counts them, so finish
	// leaves none behind.
	writing bool
	writers sync.WaitGroup
	// checkpointed is closed after each checkpoint attempt (see
	// WaitRecorded); checkpointFailed says the last one failed.
	checkpointed     chan struct{}
	checkpointFailed bool
	// abandoned: a dispose timed out while the driver ran; the driver
	// finishes the agent when it stops.
	abandoned bool
	// finishing is a one-slot semaphore around finish: the disposer and a
	// driver that outlived a dispose deadline may both try it.
	finishing chan struct{}
	finished  bool // guarded by finishing
}

var _ agents.Agent = (*ReactLoopAgent)(nil)

// ID returns the agent id.
func (a *ReactLoopAgent) ID() string { return a.id }

// Context returns the agent's scope.
func (a *ReactLoopAgent) Context() *dshctx.Context { return a.scope }

// Workspace returns the agent's workspace, an absolute path: what a
// plugin that runs commands for the agent outside a tool call (hooks)
// needs as their working directory.
func (a *ReactLoopAgent) Workspace() string { return a.workspace }

// Session returns the agent's session.
func (a *ReactLoopAgent) Session() *session.Session { return a.sess }

// Status returns the agent's status.
func (a *ReactLoopAgent) Status() agents.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status
}

// Pending returns how many messages wait in the inbox.
func (a *ReactLoopAgent) Pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inbox.queued.len() + a.inbox.steering.len()
}

// Followup queues msg to start a later turn.
func (a *ReactLoopAgent) Followup(msg llm.Message) error { return a.enqueue(msg, false) }

// Steer hands msg to the running turn before its next step; with no turn
// running it starts one.
func (a *ReactLoopAgent) Steer(msg llm.Message) error { return a.enqueue(msg, true) }

func (a *ReactLoopAgent) enqueue(msg llm.Message, steer bool) error {
	if msg.Role == "" {
		msg.Role = llm.RoleUser
	}
	if msg.ID == "" {
		msg.ID = uuid.NewString()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.disposed {
		return errs.New(agents.AgentDisposed, fmt.Sprintf("agent %q is disposed and takes no more messages", a.id))
	}
	if steer {
		a.inbox.steering.push(msg)
	} else {
		a.inbox.queued.push(msg)
	}
	if a.busy && msg.RequestID != "" {
		a.recordQueuedLocked(msg)
		return nil
	}
	a.wakeLocked()
	return nil
}

// recordQueuedLocked hands over the message/queued event of msg, which
// waits behind the running turn: its sender is told it was accepted once
// the event is durable (the agent controller waits, WaitRecorded), so a
// crash before the turn that takes it does not lose it — a resume queues
// it again (requeue). The outcome writer checkpoints it as soon as the
// driver waits on the model or a tool, or the driver's next checkpoint
// does; with the admission record that let it in, which would otherwise
// wait in memory for the turn. An idle agent's message needs none: the
// turn it starts records it at its first checkpoint. The caller holds
// a.mu; the driver runs.
func (a *ReactLoopAgent) recordQueuedLocked(msg llm.Message) {
	h := handedOutcome{ev: session.Event{Type: session.MessageQueued, Message: &msg, RequestID: msg.RequestID}}
	for i := range a.decisions {
		d := a.decisions[i]
		if d.Stage == session.StageAdmission && d.RequestID == msg.RequestID && d.Verdict == "admit" {
			a.decisions = append(a.decisions[:i:i], a.decisions[i+1:]...)
			h.decision = &d
			break
		}
	}
	a.refusals = append(a.refusals, h)
	a.startWriterLocked()
}

// wakeLocked starts the driver if it is not running.
func (a *ReactLoopAgent) wakeLocked() {
	if a.driving {
		return
	}
	a.driving = true
	go func() {
		a.drive()
		a.driverGone()
	}()
}

// driverGone runs when the driver exits. A driver that outlived its
// dispose deadline held the session until now; it lets it go itself.
func (a *ReactLoopAgent) driverGone() {
	a.mu.Lock()
	// Only a dispose that gave up waiting leaves the finish to the driver.
	// Any other dispose finishes itself, after it reported the agent
	// disposed: finishing here as well would dispose the scope under it.
	abandoned := a.abandoned && !a.driving
	a.mu.Unlock()
	if !abandoned {
		return
	}
	if err := a.finish(stdctx.Background()); err != nil {
		a.scope.Logger().Error("disposing the agent after its turn stopped failed", "agent", a.id, "error", err)
	}
}

// Abort stops the step in flight; the turn ends aborted and queued messages
// still run.
func (a *ReactLoopAgent) Abort() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.abortStep != nil {
		a.aborting = true
		a.abortStep()
	}
}

// Cancel clears both FIFOs, aborts the step in flight and ends the current
// turn — or drops the one about to start. It governs exactly one turn.
// Every message it takes out is recorded as message/dropped.
func (a *ReactLoopAgent) Cancel(cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Queued and steering messages are dropped, not kept for a next turn:
	// a cancel means stop. Each is recorded as dropped, with who
	// cancelled, by the driver (which runs whenever the inbox holds any).
	a.cancelBy = agents.CancelledBy(cause)
	a.dropAllLocked(DroppedCancelled, a.cancelBy)
	a.cancelled = true
	if a.abortStep != nil {
		a.aborting = true
		a.abortStep()
	}
	if cause != nil {
		telemetry.Logger(a.turnCtx, a.scope.Logger()).Debug("turn cancelled", "agent", a.id, "cause", cause)
	}
}

// WhenIdle returns once the agent has no turn running and nothing queued.
func (a *ReactLoopAgent) WhenIdle(ctx stdctx.Context) error {
	for {
		a.mu.Lock()
		if !a.driving && !a.writing {
			a.mu.Unlock()
			return nil
		}
		if a.idle == nil {
			a.idle = make(chan struct{})
		}
		ch := a.idle
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// setStatus records a status change and emits agent/status when it is one.
func (a *ReactLoopAgent) setStatus(to agents.Status) {
	a.mu.Lock()
	from := a.status
	if from == to || from == agents.StatusDisposed {
		a.mu.Unlock()
		return
	}
	a.status = to
	a.mu.Unlock()
	agents.EventStatus.Emit(stdctx.Background(), a.scope, agents.StatusChange{Agent: a, From: from, To: to})
}

// teardown stops the agent for good: no new messages, the step in flight
// aborted; once the driver is gone, finish writes and lets go. When ctx
// ends first, the agent stays half-disposed — unregistered, but its id and
// its session held — until its driver stops, and a later call waits again.
func (a *ReactLoopAgent) teardown(ctx stdctx.Context) error {
	a.mu.Lock()
	first := !a.torn
	var from agents.Status
	if first {
		a.torn = true
		a.disposed = true
		// The status turns disposed in the same step, so the driver, which
		// may go idle any moment now, cannot report idle in between.
		from, a.status = a.status, agents.StatusDisposed
		a.dropAllLocked(DroppedClosed, "the session was closed")
		if a.abortStep != nil {
			a.abortStep()
		}
	}
	var wait chan struct{}
	if a.driving || a.writing {
		if a.idle == nil {
			a.idle = make(chan struct{})
		}
		wait = a.idle
	}
	a.mu.Unlock()
	if first {
		a.loop.sessions.Closing(a.sess)
		agents.EventStatus.Emit(stdctx.Background(), a.scope, agents.StatusChange{Agent: a, From: from, To: agents.StatusDisposed})
	}
	if wait != nil {
		select {
		case <-wait:
		default:
			select {
			case <-wait:
			case <-ctx.Done():
				a.mu.Lock()
				still := a.driving
				if still {
					a.abandoned = true
				}
				a.mu.Unlock()
				if still {
					a.loop.registry.Retire(a)
					return errs.Wrap(agents.DisposeTimeout, ctx.Err(), fmt.Sprintf(
						"agent %q did not finish its turn before the dispose deadline; its id and session %q stay taken until the turn stops, and are then written and released", a.id, a.sess.ID()))
				}
				// The driver stopped just as the deadline passed: finish
				// below, as if it had stopped in time.
			}
		}
	}
	return a.finish(ctx)
}

// finish runs once the driver is gone: the final flush, then the session,
// the id and the scope are let go. A failed flush keeps all of them — the
// events stay in memory — and the next call retries.
func (a *ReactLoopAgent) finish(ctx stdctx.Context) error {
	select {
	case a.finishing <- struct{}{}:
	case <-ctx.Done():
		return errs.Wrap(agents.DisposeTimeout, ctx.Err(), fmt.Sprintf("agent %q: the dispose deadline passed while its session %q was being written", a.id, a.sess.ID()))
	}
	defer func() { <-a.finishing }()
	if a.finished {
		return nil
	}
	// An outcome writer may be checkpointing; what it has not taken yet
	// is written here.
	select {
	case a.pen <- struct{}{}:
	case <-ctx.Done():
		return errs.Wrap(agents.DisposeTimeout, ctx.Err(), fmt.Sprintf("agent %q: the dispose deadline passed while its session %q was being written", a.id, a.sess.ID()))
	}
	a.writeLeftovers()
	var err error
	ferr := a.sess.Flush(ctx)
	<-a.pen
	// A writer that waited for the pen finds the agent sealed and stops.
	a.writers.Wait()
	a.checkpointDone(ferr)
	if ferr != nil {
		if !errs.Has(ferr, session.SessionLocked, session.ReasonFenced) {
			return errs.Wrap(session.FlushFailed, ferr, fmt.Sprintf(
				"agent %q: the final write of session %q failed; its events stay in memory and the session stays held — dispose again to retry", a.id, a.sess.ID()))
		}
		// Fenced: another writer owns the log now (a shared store's lease
		// ran out), so no retry could write what is left; holding the
		// session would only keep a dead copy running.
		err = errs.Wrap(session.SessionLocked, ferr, fmt.Sprintf(
			"agent %q: session %q is fenced (its lease was released, or ran out and another owner writes it now); the events this agent had not written are dropped", a.id, a.sess.ID())).WithReason(session.ReasonFenced)
	}
	a.finished = true
	if cerr := a.loop.sessions.Close(a.sess); cerr != nil {
		err = errors.Join(err, errs.Wrap(session.FlushFailed, cerr, fmt.Sprintf("agent %q: releasing session %q failed", a.id, a.sess.ID())))
	}
	a.loop.registry.Unregister(a)
	agents.EventDisposed.Emit(stdctx.Background(), a.scope, a)
	// The scope's teardown (the agent's presets, their final writes) is
	// bounded by the same ctx, and what fails in it reaches the caller.
	return errors.Join(err, a.scope.Dispose(ctx))
}

// reportError emits agent/error.
func (a *ReactLoopAgent) reportError(err error) {
	agents.EventError.Emit(stdctx.Background(), a.scope, agents.ErrorReport{Agent: a, Err: err})
}

// loopGone disposes the agent with the loop, bounded by the ctx the loop's
// fiber is disposed with. An agent whose dispose already timed out is not
// waited for again — its driver lets go when it stops — so a stuck tool
// cannot hang the shutdown of the whole tree.
func (a *ReactLoopAgent) loopGone(ctx stdctx.Context) error {
	a.mu.Lock()
	torn, driving := a.torn, a.driving
	a.mu.Unlock()
	switch {
	case !torn:
		return a.teardown(ctx)
	case driving:
		return errs.New(agents.DisposeTimeout, fmt.Sprintf(
			"agent %q is still running the turn its dispose deadline interrupted; session %q is written and released when it stops", a.id, a.sess.ID()))
	}
	return a.finish(ctx)
}
