package agentloop

import (
	stdctx "context"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// Inbox holds an agent's two FIFOs: queued messages start the next turn,
// all that are queued when it starts going into it together; steering
// messages join the running turn before its next step. It is guarded by its
// agent's lock.
type Inbox struct {
	queued   fifo
	steering fifo
}

type fifo struct{ items []llm.Message }

func (f *fifo) push(m llm.Message) { f.items = append(f.items, m) }

func (f *fifo) drain() []llm.Message {
	out := f.items
	f.items = nil
	return out
}

func (f *fifo) len() int { return len(f.items) }

// dropped is a message that left the inbox without reaching a turn: a
// cancel or the agent's close took it. The driver records each as a
// message/dropped event, so every accepted message ends in the log.
type dropped struct {
	msg    llm.Message
	reason string // "cancelled" or "closed"
	by     string
}

// Reasons of message/dropped.
const (
	DroppedCancelled = session.DroppedCancelled
	DroppedClosed    = session.DroppedClosed
)

// dropAllLocked empties both FIFOs into a.drops. The caller holds a.mu.
func (a *ReactLoopAgent) dropAllLocked(reason, by string) {
	for _, f := range []*fifo{&a.inbox.steering, &a.inbox.queued} {
		for _, m := range f.drain() {
			a.drops = append(a.drops, dropped{msg: m, reason: reason, by: by})
		}
	}
}

// recordDropped appends a message/dropped event for every message dropped
// since the last call, the outcomes handed over, and makes them durable.
// Only the driver calls it, holding the pen (see ReactLoopAgent.pen).
func (a *ReactLoopAgent) recordDropped() {
	a.mu.Lock()
	turn := a.turn
	recorded := len(a.decisions)+len(a.records) > 0
	queued := a.inbox.queued.len()+a.inbox.steering.len() > 0
	a.mu.Unlock()
	// Nothing follows records alone to make them durable: a message
	// admitted and queued is flushed with its turn's prompt.
	if a.appendHanded(turn) || (recorded && !queued) {
		a.flush(stdctx.Background())
	}
}

// appendHanded appends, as events of turn, what was handed over so far:
// the decision records and plugins' events, then the outcomes handed over
// (see appendOutcomes) and the inbox's drops. It reports whether there
// were outcomes. Only the driver calls it, or finish once the driver is
// gone.
func (a *ReactLoopAgent) appendHanded(turn int) bool {
	a.mu.Lock()
	// The outcomes are taken before the records: the controller hands a
	// decision over before its outcome, so every outcome taken has its
	// record taken too, and a record comes before its outcome.
	drops, refusals := a.drops, a.refusals
	a.drops, a.refusals = nil, nil
	a.mu.Unlock()
	a.recordDecisions(turn, 0)
	a.appendOutcomes(turn, drops, refusals)
	return len(drops)+len(refusals) > 0
}

// appendOutcomes appends, as events of turn, what was handed over, each
// after its decision record, then the inbox's drops. In that order: what
// was handed over holds the message/queued of a message a cancel or a
// close may have dropped since, and a request's last event is its
// outcome — a drop written before its queued record would leave the
// request queued, and a resume would run what its sender heard dropped.
func (a *ReactLoopAgent) appendOutcomes(turn int, drops []dropped, refusals []handedOutcome) {
	ctx := stdctx.Background()
	for _, h := range refusals {
		if h.decision != nil {
			a.sess.AppendDecision(ctx, turn, 0, *h.decision)
		}
		ev := h.ev
		ev.Turn, ev.Step = turn, 0
		a.sess.Append(ctx, ev)
	}
	for i := range drops {
		d := &drops[i]
		a.sess.Append(ctx, session.Event{Type: session.MessageDropped, Turn: turn, Message: &d.msg,
			RequestID: d.msg.RequestID, Reason: d.reason, By: d.by})
	}
}

// appendRefusals appends the outcomes handed over through RecordEvent so
// far, each after its decision record, as events of the running (or last)
// turn: whoever checkpoints next makes them durable. The caller holds the
// pen.
func (a *ReactLoopAgent) appendRefusals() {
	a.mu.Lock()
	if len(a.refusals) == 0 {
		a.mu.Unlock()
		return
	}
	refusals, turn := a.refusals, a.turn
	a.refusals = nil
	a.mu.Unlock()
	a.appendOutcomes(turn, nil, refusals)
}

// dropTaken records msgs, taken from the queue for a turn that a cancel or
// a close stopped before it started, as dropped.
func (a *ReactLoopAgent) dropTaken(msgs []llm.Message) {
	a.mu.Lock()
	reason, by := DroppedCancelled, a.cancelBy
	if a.disposed {
		reason, by = DroppedClosed, "the session was closed"
	}
	for _, m := range msgs {
		a.drops = append(a.drops, dropped{msg: m, reason: reason, by: by})
	}
	a.mu.Unlock()
	a.recordDropped()
}

// requeue queues again the messages a resumed log holds as queued with
// nothing after them (session.MessageQueued): each was accepted and its
// sender told so, and the process that held it in memory stopped before
// a turn took it or a cancel or a close dropped it. Each runs once, in a
// turn of its own (or with the others requeued), its retry answered with
// its message id (the log's record of its request id). queued are the
// log's message/queued events, in order; a fresh session has none.
func (a *ReactLoopAgent) requeue(queued []session.Event) {
	var msgs []llm.Message
	for _, e := range queued {
		if e.Message == nil || e.RequestID == "" {
			continue
		}
		if last, ok := a.sess.Outcome(e.RequestID); ok && last.Seq == e.Seq {
			msgs = append(msgs, *e.Message)
		}
	}
	if len(msgs) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.disposed {
		return
	}
	for _, m := range msgs {
		a.inbox.queued.push(m)
	}
	a.wakeLocked()
}
