package agentloop

import (
	stdctx "context"
	"fmt"
	"time"

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
	record := a.RecordDecision
	if d.WithOutcome && d.Decision.RequestID != "" {
		record = a.parkDecision
	}
	if err := record(d.Decision); err != nil && !errs.HasCode(err, agents.AgentDisposed) {
		return err
	}
	return nil
}

// parkDecision keeps d until the outcome event of its request comes
// through RecordEvent, which hands the two over together: a close that
// comes in between lets go of d with the agent (writeLeftovers), and the
// outcome is then refused, so the log holds both or neither. A record
// written alone would leave a retry to be decided — and recorded — anew
// beside it.
func (a *ReactLoopAgent) parkDecision(d session.Decision) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sealed {
		return errs.New(agents.AgentDisposed, fmt.Sprintf("agent %q is disposed and records no more decisions", a.id))
	}
	if a.parked == nil {
		a.parked = map[string]session.Decision{}
	}
	a.parked[d.RequestID] = d
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
	if a.sealed {
		return errs.New(agents.AgentDisposed, fmt.Sprintf("agent %q is disposed and records no more decisions", a.id))
	}
	a.decisions = append(a.decisions, d)
	if a.disposed {
		// The close has begun: the driver, if it still runs, writes the
		// record before it exits, and finish does otherwise. Waking a
		// driver now would append beside finish.
		return nil
	}
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

// RecordEvent has the agent append e to the session: appends go one at a
// time, by whoever holds the pen (the driver, its outcome writer), so a
// stage or plugin hands its events over rather than appending them itself. Where e lands depends on what it
// records:
//
//   - an outcome of a message that never entered the inbox (a
//     message/refused or message/expired of the agent controller's, or the
//     message/dropped of a delivery withdrawn in admission), after the
//     decision record parked for it (see parkDecision): at once, as an
//     event of the running (or last) turn and step 0 — by the driver when
//     the agent is idle, or during a turn by the outcome writer as soon as
//     the driver waits on the model or a tool, or by the driver at its
//     next checkpoint, whichever comes first (see writeOutcomes);
//   - any other event (a checkpoint, a plan) like a decision record:
//     before the next tool result or prompt, as an event of that turn and
//     step, or at once when the agent is idle.
//
// Either way the driver makes it durable with what follows it; once a
// close began, the driver's last round or the close's final write does.
// An agent whose close has written its last events records nothing and
// says so (agents.AgentDisposed).
func (a *ReactLoopAgent) RecordEvent(e session.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sealed {
		return errs.New(agents.AgentDisposed, fmt.Sprintf("agent %q is disposed and records no more events", a.id))
	}
	switch e.Type {
	case session.MessageRefused, session.MessageExpired, session.MessageDropped:
		h := handedOutcome{ev: e}
		if e.Type != session.MessageDropped {
			// A withdrawal has no decision record: none let anything
			// through or turned anything away.
			h.decision = a.takeDecisionLocked(e.RequestID)
		}
		a.refusals = append(a.refusals, h)
		if !a.disposed && a.driving && a.status == agents.StatusRunning {
			// The driver may be deep in a step; its sender waits for
			// the record (WaitRecorded).
			a.startWriterLocked()
			return nil
		}
	default:
		a.records = append(a.records, e)
	}
	// Once a close began the driver (if it still runs) or finish writes
	// it; see RecordDecision.
	if !a.disposed {
		a.wakeLocked()
	}
	return nil
}

// handedOutcome is an outcome event handed over through RecordEvent with
// the decision record that led to it, if one did (a withdrawal has none).
type handedOutcome struct {
	ev       session.Event
	decision *session.Decision
}

// takeDecisionLocked returns the decision record of requestID's outcome:
// the one parked for it or, from a stage that hands its records over
// unparked (RecordDecision), an admission record still waiting among the
// decisions; nil when there is none. Either way it is written right before
// its outcome. The caller holds a.mu.
func (a *ReactLoopAgent) takeDecisionLocked(requestID string) *session.Decision {
	if requestID == "" {
		return nil
	}
	if d, ok := a.parked[requestID]; ok {
		delete(a.parked, requestID)
		return &d
	}
	for i := range a.decisions {
		d := a.decisions[i]
		if d.Stage == session.StageAdmission && d.RequestID == requestID && (d.Verdict == "refuse" || d.Verdict == "expire") {
			a.decisions = append(a.decisions[:i:i], a.decisions[i+1:]...)
			return &d
		}
	}
	return nil
}

// startWriterLocked starts the outcome writer unless one runs. The
// caller holds a.mu.
func (a *ReactLoopAgent) startWriterLocked() {
	if a.writing {
		return
	}
	a.writing = true
	a.writers.Add(1)
	go a.writeOutcomes()
}

// writeOutcomes is the outcome writer: it appends the outcomes handed over
// during a turn, each after its decision record, and checkpoints them as
// soon as it holds the pen — while the driver waits on the model's stream
// or on tool calls — unless the driver's next checkpoint took them first.
// Their senders wait for that checkpoint (WaitRecorded), so the wait is
// one checkpoint, not the rest of a step: a crash mid-turn takes back no
// refusal its sender heard. The events are of the running turn, step 0,
// wherever they fall among the turn's events; they are not part of the
// history the model sees.
func (a *ReactLoopAgent) writeOutcomes() {
	defer a.writers.Done()
	a.pen <- struct{}{}
	for {
		a.mu.Lock()
		if len(a.refusals) == 0 || a.sealed {
			a.writing = false
			a.idleLocked()
			a.mu.Unlock()
			<-a.pen
			return
		}
		a.mu.Unlock()
		a.flush(stdctx.Background())
	}
}

// idleLocked wakes WhenIdle and a dispose once neither the driver nor the
// outcome writer runs. The caller holds a.mu.
func (a *ReactLoopAgent) idleLocked() {
	if a.driving || a.writing || a.idle == nil {
		return
	}
	close(a.idle)
	a.idle = nil
}

// writeLeftovers appends what was handed over after the driver's last
// round — an outcome decided while the close began, its decision record —
// and seals the agent, so whatever comes later is refused rather than
// left where no one appends it. Only finish calls it: the driver is gone
// and cannot come back, which leaves finish the one appender.
func (a *ReactLoopAgent) writeLeftovers() {
	a.mu.Lock()
	a.sealed = true
	turn := a.turn
	// A record whose outcome never came: the outcome, handed over from
	// now on, is refused, so the record goes too (see parkDecision).
	a.parked = nil
	a.mu.Unlock()
	a.appendHanded(turn)
}

// recordWait bounds WaitRecorded: a sender is answered after it even if
// the checkpoint is still running (a store that hangs), or if the wait
// would never end (a listener on the driver's own goroutine delivering to
// its agent while it reports idle).
const recordWait = 5 * time.Second

// WaitRecorded returns once the outcome event of requestID handed over
// through RecordEvent is durable, so that its sender — told at once that
// the message was refused, expired or withdrawn — is never answered with
// an outcome a crash takes back and a retry after the restart would not
// find. Such an event is written and checkpointed at once — by an idle
// agent's driver, or by the outcome writer during a turn (see
// writeOutcomes) — so the wait is one checkpoint. It does not wait for an
// event handed to an agent whose close has begun: the close writes it
// with its last events, and what holds the close up may be waiting for
// this very answer. It gives up when a checkpoint fails, after
// recordWait, or when ctx ends.
func (a *ReactLoopAgent) WaitRecorded(ctx stdctx.Context, requestID string) error {
	if requestID == "" {
		return nil
	}
	bound := time.NewTimer(recordWait)
	defer bound.Stop()
	for {
		a.mu.Lock()
		failed, closing := a.checkpointFailed, a.disposed
		if a.checkpointed == nil {
			a.checkpointed = make(chan struct{})
		}
		// Taken before the log is read: a checkpoint ending meanwhile
		// has closed it, and the loop looks again.
		next := a.checkpointed
		a.mu.Unlock()
		ev, written := a.sess.Outcome(requestID)
		switch {
		case written && ev.Seq <= a.sess.Durable():
			return nil
		case failed:
			return nil
		case !written && closing:
			return nil
		}
		select {
		case <-next:
		case <-bound.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// checkpointDone wakes the callers of WaitRecorded after a checkpoint
// attempt; err is its failure.
func (a *ReactLoopAgent) checkpointDone(err error) {
	a.mu.Lock()
	a.checkpointFailed = err != nil
	if a.checkpointed != nil {
		close(a.checkpointed)
		a.checkpointed = nil
	}
	a.mu.Unlock()
}
