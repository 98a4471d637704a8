package live

import (
	stdctx "context"
	"fmt"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/approval"
)

// question is the approval request being asked; the approval service asks
// one at a time per agent.
type question struct {
	id     int64
	req    approval.Request
	done   chan struct{}
	answer approval.Answer
}

// approve counts one more approving client, attaching the Hub to the
// approval service for the first (unless a grace kept it attached); the
// caller holds mu.
func (h *Hub) approve() error {
	if h.approvers == 0 {
		if h.unapprove == nil {
			if err := h.attachApprovals(); err != nil {
				return err
			}
		}
		if h.grace != nil {
			h.grace.Stop()
			h.grace = nil
		}
	}
	h.approvers++
	return nil
}

// attachApprovals makes the Hub the agent's approval answerer; the caller
// holds mu.
func (h *Hub) attachApprovals() error {
	if h.opts.Approvals == nil {
		return errs.New(errs.InvalidArgument, fmt.Sprintf(
			"cannot attach to agent %q to answer approvals: no approval service is loaded (mount the core services or pass Options.Approvals)", h.agent.ID()))
	}
	detach, err := h.opts.Approvals.Attach(h.agent.ID(), h.answer)
	if err != nil {
		return err
	}
	h.unapprove = detach
	return nil
}

// unapproveOne counts one approving client less. With none left the Hub
// stays attached for Options.ApproverGrace, so a question asked meanwhile
// waits for a client to come back; without a grace (or once the Hub is
// closed) it detaches at once, which cancels a question being asked, so
// it fails closed. The caller holds mu.
func (h *Hub) unapproveOne() {
	if h.approvers--; h.approvers > 0 || h.unapprove == nil {
		return
	}
	if h.opts.ApproverGrace > 0 && h.closed == nil {
		h.startGraceLocked()
		return
	}
	h.unapprove()
	h.unapprove = nil
}

// startGraceLocked starts the wait for an approving client; the caller
// holds mu.
func (h *Hub) startGraceLocked() {
	var t *time.Timer
	t = time.AfterFunc(h.opts.ApproverGrace, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.grace == t {
			h.endGraceLocked()
		}
	})
	h.grace = t
}

// endGraceLocked detaches a Hub that no approving client came back to
// (a question waiting then fails closed); the caller holds mu.
func (h *Hub) endGraceLocked() {
	if h.grace == nil {
		return
	}
	h.grace.Stop()
	h.grace = nil
	if h.approvers == 0 && h.unapprove != nil {
		h.unapprove()
		h.unapprove = nil
	}
}

// answer is the Hub's approval.Answerer: it asks every approving client
// and returns the first answer.
func (h *Hub) answer(ctx stdctx.Context, req approval.Request) (approval.Answer, error) {
	h.mu.Lock()
	if h.closed != nil || h.approvers == 0 && h.grace == nil {
		h.mu.Unlock()
		return approval.Answer{}, errs.New(approval.NoAnswerer, fmt.Sprintf(
			"no client that answers approvals is attached to agent %q", h.agent.ID()))
	}
	h.questions++
	q := &question{id: h.questions, req: req, done: make(chan struct{})}
	h.question = q
	h.broadcast(Update{Kind: KindQuestion, Question: &Question{ID: q.id, Request: req}}, true)
	h.mu.Unlock()

	select {
	case <-q.done:
		return q.answer, nil
	case <-ctx.Done():
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.question != q {
		// Answered just as the ask ended.
		return q.answer, nil
	}
	h.question = nil
	err := ctx.Err()
	reason := fmt.Sprintf("the call was cancelled: %v", stdctx.Cause(ctx))
	if h.unapprove == nil && h.closed == nil && h.opts.ApproverGrace > 0 {
		// The grace ran out with no approving client back.
		err = errs.New(approval.NoAnswerer, fmt.Sprintf(
			"no client that answers approvals attached to agent %q within %s (the approver grace), so the call is refused (fail closed)",
			h.agent.ID(), h.opts.ApproverGrace))
		reason = err.Error()
	}
	s := Settled{QuestionID: q.id, Withdrawn: true, Reason: reason}
	h.settled = s
	h.broadcast(Update{Kind: KindSettled, Settled: &s}, true)
	return approval.Answer{}, err
}

// Answer answers question id. The first answer wins; the other approving
// clients get a KindSettled update naming this client. An answer to a
// question already answered or withdrawn fails with LIVE_QUESTION_CLOSED
// and says which.
func (c *Client) Answer(id int64, ans approval.Answer) error {
	switch ans.Choice {
	case approval.AllowOnce, approval.AllowSession, approval.Deny:
	default:
		return errs.New(errs.InvalidArgument, fmt.Sprintf(
			"answer %q to question %d: want %q, %q or %q", ans.Choice, id, approval.AllowOnce, approval.AllowSession, approval.Deny))
	}
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; !ok {
		return errs.New(Detached, fmt.Sprintf("client %q is no longer attached to agent %q; re-attach to answer", c.name, h.agent.ID()))
	}
	if !c.approvals {
		return errs.New(NotApprover, fmt.Sprintf("client %q did not attach to answer approvals; attach with Approvals set", c.name))
	}
	q := h.question
	if q == nil || q.id != id {
		why := "it is not open"
		switch {
		case h.settled.QuestionID == id && h.settled.Withdrawn:
			why = "it was withdrawn: " + h.settled.Reason
		case h.settled.QuestionID == id:
			why = fmt.Sprintf("it was answered by %q (%s)", h.settled.AnsweredBy, h.settled.Answer.Choice)
		}
		return errs.New(QuestionClosed, fmt.Sprintf("question %d of agent %q cannot be answered: %s", id, h.agent.ID(), why))
	}
	q.answer = ans
	h.question = nil
	close(q.done)
	s := Settled{QuestionID: id, AnsweredBy: c.name, Answer: ans}
	h.settled = s
	for o := range h.clients {
		if o == c || !o.approvals {
			continue
		}
		if ok, _ := o.push(Update{Kind: KindSettled, Settled: &s}); !ok {
			h.drop(o, o.overflow())
		}
	}
	return nil
}
