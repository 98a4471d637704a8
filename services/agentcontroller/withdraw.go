package agentcontroller

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// Withdraw takes back every message on its way to agent's inbox — waiting
// behind another delivery, or being prepared and decided — as a cancel
// of the agent empties the inbox itself. Each is recorded as
// message/dropped (reason "cancelled", by whom cause names: see
// agents.CancelledBy) in place of any admission decision, and its sender
// gets MessageDropped. A listener holding one whose sender can cancel
// sees its context end with cause; one whose sender cannot (a background
// context) finishes deciding, and its decision is discarded. A delivery
// that starts after Withdraw returns is not touched.
//
// A session's cancel calls Withdraw and then agents.Agent.Cancel, in that
// order: a message that clears admission at that moment is either
// withdrawn or already in the inbox the cancel empties. Withdraw returns
// how many deliveries it withdrew.
func (c *Controller) Withdraw(agent agents.Agent, cause error) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.chains[agent.ID()]
	if ch == nil {
		return 0
	}
	ch.withdrawals++
	ch.withdrawnBy, ch.cause = agents.CancelledBy(cause), cause
	n := 0
	for _, d := range ch.queue {
		if d.abandoned {
			continue
		}
		n++
		if d.interrupt != nil {
			d.interrupt(cause)
		}
	}
	return n
}

// withdrawn reports whether a Withdraw came after d joined agentID's
// chain, and who withdrew it.
func (c *Controller) withdrawn(agentID string, d *delivery) (by string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.withdrawnLocked(agentID, d)
}

func (c *Controller) withdrawnLocked(agentID string, d *delivery) (by string, ok bool) {
	ch := c.chains[agentID]
	if ch == nil || ch.withdrawals == d.gen {
		return "", false
	}
	return ch.withdrawnBy, true
}

// drop ends a withdrawn delivery of msg: the session log records it as
// dropped, a retry of its request id learns so, and its sender gets
// MessageDropped.
func (c *Controller) drop(ctx stdctx.Context, agent agents.Agent, msg llm.Message, by string) outcome {
	// The record keeps the text only: the parts' bytes are released with
	// the delivery (see Prepared.Release).
	m := msg
	m.Parts = nil
	ev := session.Event{Type: session.MessageDropped, Message: &m, RequestID: msg.RequestID, Reason: session.DroppedCancelled, By: by}
	if !c.handOver(ctx, agent, ev, "recording a withdrawn message failed") {
		return outcome{err: agentGone(agent.ID())}
	}
	return outcome{err: withdrawnError(agent.ID(), ev)}
}

// withdrawnError tells the sender of a withdrawn message what became of
// it; its details are DroppedError's.
func withdrawnError(agentID string, ev session.Event) *errs.Error {
	what := "the message"
	if ev.RequestID != "" {
		what = fmt.Sprintf("request %q", ev.RequestID)
	}
	e := errs.New(MessageDropped, fmt.Sprintf(
		"%s to agent %q was withdrawn on its way through admission: %s cancelled the session; send it again to deliver it",
		what, agentID, ev.By)).WithReason(ReasonDropped)
	e.Details = map[string]any{"message_id": ev.Message.ID, "request_id": ev.RequestID, "turn": ev.Turn, "dropped": ev.Reason, "by": ev.By}
	return e
}
