package agentloop

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
)

// onDecision hands a decision a stage made for one of the loop's agents to
// that agent, whose driver records it. Decisions for an agent that is not
// the loop's, or gone, are not recorded: there is no log to hold them.
func (l *Loop) onDecision(_ stdctx.Context, d session.Decided) error {
	ag, ok := l.registry.Get(d.AgentID)
	if !ok {
		return nil
	}
	a, ok := ag.(*ReactLoopAgent)
	if !ok {
		return nil
	}
	if err := a.RecordDecision(d.Decision); err != nil && !errs.HasCode(err, agents.AgentDisposed) {
		return err
	}
	return nil
}

// RecordDecision has the driver append a decision record to the session,
// for the same reason RecordEvent does: the driver is the one goroutine
// that appends. An admission that admitted is appended when its message
// starts or joins a turn (or at the driver's next round, should the
// insertion fail); any other record wakes an idle driver. A stage hands the record over before it acts on the
// decision (the controller before the message enters the inbox, the tools
// service before the call runs), and the driver appends what was handed
// over before the turn's prompt, a steering message or a tool result, so
// a record comes before what it let through.
func (a *ReactLoopAgent) RecordDecision(d session.Decision) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.disposed {
		return errs.New(agents.AgentDisposed, fmt.Sprintf("agent %q is disposed and records no more decisions", a.id))
	}
	a.decisions = append(a.decisions, d)
	if d.Stage == session.StageAdmission && d.Verdict == "admit" {
		// The message follows into the inbox, which wakes the driver;
		// waking it now would have it record and checkpoint the record
		// alone, a moment before the turn's own checkpoint.
		return nil
	}
	a.wakeLocked()
	return nil
}

// recordDecisions appends the decisions handed over so far, then the
// events plugins handed over (session/record: a checkpoint, a plan), in
// the order they came, as events of the given turn and step. Only the
// driver calls it.
func (a *ReactLoopAgent) recordDecisions(turn, step int) {
	a.mu.Lock()
	ds, rs := a.decisions, a.records
	a.decisions, a.records = nil, nil
	a.mu.Unlock()
	for _, d := range ds {
		a.sess.AppendDecision(stdctx.Background(), turn, step, d)
	}
	for _, e := range rs {
		e.Turn, e.Step = turn, step
		a.sess.Append(stdctx.Background(), e)
	}
}

// onRecord hands an event of session/record to its agent's driver. An
// agent disposed meanwhile (a session closed while a tool call ran and
// took its checkpoint) has no log left to hold the event: that is no
// failure, as for a decision.
func (l *Loop) onRecord(_ stdctx.Context, r session.Record) error {
	ag, ok := l.registry.Get(r.AgentID)
	if !ok {
		return errs.New(agents.AgentNotFound, fmt.Sprintf("agent %q is not running, so its session records nothing", r.AgentID))
	}
	a, ok := ag.(*ReactLoopAgent)
	if !ok {
		return nil
	}
	if err := a.RecordEvent(r.Event); err != nil && !errs.HasCode(err, agents.AgentDisposed) {
		return err
	}
	return nil
}

// RecordEvent has the driver append e to the session: the driver is the
// one goroutine that appends, so a stage or plugin hands its events over
// rather than appending them itself. Where e lands depends on what it
// records:
//
//   - an outcome of a message that never entered the inbox (a
//     message/refused or message/expired of the agent controller's, or the
//     message/dropped of a delivery withdrawn in admission) with the
//     messages the inbox dropped: at the running turn's end, or at once
//     when the agent is idle, as events of that turn and step 0;
//   - any other event (a checkpoint, a plan) like a decision record:
//     before the next tool result or prompt, as an event of that turn and
//     step, or at once when the agent is idle.
//
// Either way the driver makes it durable with what follows it. A
// disposed agent records nothing and says so.
func (a *ReactLoopAgent) RecordEvent(e session.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.disposed {
		return errs.New(agents.AgentDisposed, fmt.Sprintf("agent %q is disposed and records no more events", a.id))
	}
	switch e.Type {
	case session.MessageRefused, session.MessageExpired, session.MessageDropped:
		a.refusals = append(a.refusals, e)
	default:
		a.records = append(a.records, e)
	}
	a.wakeLocked()
	return nil
}
