package agentloop

import (
	stdctx "context"
	"fmt"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
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

	mu       sync.Mutex
	inbox    Inbox
	status   agents.Status
	driving  bool
	turn     int
	disposed bool
	// cancelled marks the current or next turn as cancelled; the driver
	// resets it once per iteration so it never reaches a later message.
	cancelled bool
	// abortStep cancels the step in flight; aborting records why.
	abortStep stdctx.CancelFunc
	aborting  bool
	idle      chan struct{} // closed when the driver goes idle
	stopped   chan struct{} // closed when a disposed agent's driver is gone
	torn      bool
	tornDown  chan struct{}
}

var _ agents.Agent = (*ReactLoopAgent)(nil)

// ID returns the agent id.
func (a *ReactLoopAgent) ID() string { return a.id }

// Context returns the agent's scope.
func (a *ReactLoopAgent) Context() *dshctx.Context { return a.scope }

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
	a.wakeLocked()
	return nil
}

// wakeLocked starts the driver if it is not running.
func (a *ReactLoopAgent) wakeLocked() {
	if a.driving {
		return
	}
	a.driving = true
	go a.drive()
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
func (a *ReactLoopAgent) Cancel(cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inbox.queued.drain()
	a.inbox.steering.drain()
	a.cancelled = true
	if a.abortStep != nil {
		a.aborting = true
		a.abortStep()
	}
	if cause != nil {
		a.scope.Logger().Debug("turn cancelled", "agent", a.id, "cause", cause)
	}
}

// WhenIdle returns once the agent has no turn running and nothing queued.
func (a *ReactLoopAgent) WhenIdle(ctx stdctx.Context) error {
	for {
		a.mu.Lock()
		if !a.driving {
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
// aborted, and it returns once the driver is gone or ctx ends. Later calls
// wait for the first.
func (a *ReactLoopAgent) teardown(ctx stdctx.Context) error {
	a.mu.Lock()
	if a.torn {
		ch := a.tornDown
		a.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a.torn = true
	a.tornDown = make(chan struct{})
	a.disposed = true
	a.inbox.queued.drain()
	a.inbox.steering.drain()
	if a.abortStep != nil {
		a.abortStep()
	}
	var wait chan struct{}
	if a.driving {
		if a.idle == nil {
			a.idle = make(chan struct{})
		}
		wait = a.idle
	}
	a.mu.Unlock()
	defer close(a.tornDown)

	a.setStatus(agents.StatusDisposed)
	var err error
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			err = errs.Wrap(errs.ContextInactive, ctx.Err(), fmt.Sprintf("agent %q did not finish its turn before the dispose deadline", a.id))
		}
	}
	a.loop.registry.Unregister(a)
	a.loop.sessions.Remove(a.sess.ID())
	agents.EventDisposed.Emit(stdctx.Background(), a.scope, a)
	a.scope.Dispose()
	return err
}

// reportError emits agent/error.
func (a *ReactLoopAgent) reportError(err error) {
	agents.EventError.Emit(stdctx.Background(), a.scope, agents.ErrorReport{Agent: a, Err: err})
}
