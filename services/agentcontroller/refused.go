package agentcontroller

import (
	stdctx "context"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/telemetry"
)

// Outcome names of a request that did not end in a turn. Delivered and
// merged messages are read from their user/message or steering/message.
const (
	OutcomeRefused = "refused"
	OutcomeExpired = "expired"
	OutcomeDropped = "dropped"
)

// refusalRecorder is the part of an agent that records a refusal in its
// session log through whoever appends to it (the agent loop's RecordEvent:
// its idle driver, or during a turn its outcome writer, appends the
// outcome event at once). An agent without it keeps its refusals in the
// controller's memory only, for as long as it lives.
type refusalRecorder interface {
	RecordEvent(ev session.Event) error
}

// recordWaiter is the part of an agent that tells when an outcome event
// handed over is durable (the agent loop's WaitRecorded).
type recordWaiter interface {
	WaitRecorded(ctx stdctx.Context, requestID string) error
}

// awaitRecord holds the answer to a delivery whose message ended in a
// recorded outcome (refused, expired, withdrawn) until the agent made it
// durable: a crash right after the answer must not take it back, or a
// retry after the restart (a webhook's redelivery) would be decided anew.
// It runs after the delivery left its agent's chain, so the deliveries
// behind it go on meanwhile and the refusals of a flood share the
// agent's checkpoints.
//
// A message accepted with a request id waits the same way, until the log
// holds a record of it: the user/message of the turn it started, or the
// message/queued the agent writes while a turn runs. A sender told
// "accepted" must not lose its message to a crash that follows the
// answer; a retry after the restart finds the record and the resumed
// session runs the message once.
func awaitRecord(ctx stdctx.Context, agent agents.Agent, requestID string, err error) {
	if requestID == "" || (err != nil && OutcomeOf(err) == "") {
		return
	}
	if w, ok := agent.(recordWaiter); ok {
		// A sender that leaves meanwhile has its answer anyway.
		_ = w.WaitRecorded(ctx, requestID)
	}
}

// recordable says whether a refusal is the fate of this message — a check
// turned it down or its wait ran out — rather than of the session (the
// agent or the controller gone) or of a failing check, which the next
// attempt may pass.
func recordable(err error) (Refusal, bool) {
	r, ok := RefusalOf(err)
	if !ok {
		return r, false
	}
	switch r.Reason {
	case ReasonAdmissionFailed, ReasonAgentGone, ReasonStopped:
		return r, false
	}
	return r, true
}

// recordRefusal keeps the refusal err of req's message in memory until
// the session log holds it, has the agent append it there, and returns the
// error its sender gets: err, or agentGone when the agent's log was let go
// before it could take the record. Only requests with an id are recorded:
// without one, no retry can ask.
func (c *Controller) recordRefusal(ctx stdctx.Context, agent agents.Agent, msg llm.Message, err error) error {
	if msg.RequestID == "" {
		return err
	}
	r, ok := recordable(err)
	if !ok {
		return err
	}
	typ := session.MessageRefused
	if r.Expired {
		typ = session.MessageExpired
	}
	// The parts' bytes are released with the refusal; the record keeps
	// the text only, never a reference to bytes no longer stored.
	m := msg
	m.Parts = nil
	ev := session.Event{Type: typ, Message: &m, RequestID: msg.RequestID, Reason: r.Reason, Error: r.Message}
	if !c.handOver(ctx, agent, ev, "recording a refused message failed") {
		return agentGone(agent.ID())
	}
	return err
}

// handOver keeps ev, the outcome of a message that never entered the
// inbox, in memory until the session log holds it, and has the agent
// append it there (Deliver waits until it is durable before it answers;
// see awaitRecord). It reports false when the agent's log was let go
// first: no record will hold ev, so ev is not the message's fate — its
// sender must be told the session closed, as for any delivery the agent
// left, and a retry is decided anew — rather than an outcome a retry
// after a resume would not find.
func (c *Controller) handOver(ctx stdctx.Context, agent agents.Agent, ev session.Event, failed string) bool {
	key := acceptKey{agent.ID(), ev.RequestID}
	if ev.RequestID != "" {
		c.mu.Lock()
		c.refused[key] = ev
		c.mu.Unlock()
	}
	rec, ok := agent.(refusalRecorder)
	if !ok {
		return true
	}
	err := rec.RecordEvent(ev)
	if err == nil {
		return true
	}
	if !errs.HasCode(err, agents.AgentDisposed) {
		// Kept in memory: the controller answers a retry while the agent lives.
		telemetry.Logger(ctx, agent.Context().Logger()).Warn(failed, "agent", agent.ID(), "request_id", ev.RequestID, "error", err)
		return true
	}
	if ev.RequestID != "" {
		c.mu.Lock()
		delete(c.refused, key)
		c.mu.Unlock()
	}
	return false
}

// Unwritten returns the outcome event of the message sent to agentID
// under requestID that never entered the inbox — refused, expired, or
// withdrawn by a cancel — while the agent's log does not hold it yet: the
// agent appends it at once (its sender waits for that, unless the session
// is closing, whose close appends it). Read it before the log: this copy
// is forgotten only once the log holds the event, so a reader that looks
// here first and in the log next never misses it.
func (c *Controller) Unwritten(agentID, requestID string) (session.Event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ev, ok := c.refused[acceptKey{agentID, requestID}]
	return ev, ok
}

// recorded answers a retry of a request id from what became of its first
// attempt: the message id of one accepted (queued, delivered or merged),
// or the error of one dropped, refused or expired. ok is false for a
// request id never seen. A request id reused by another sender, or for
// other text, is refused (RequestIDReused): answering it with the first
// message's fate would lose the second message and tell its sender of a
// message that is not theirs.
func (c *Controller) recorded(agent agents.Agent, req Request) (outcome, bool) {
	requestID := req.RequestID
	key := acceptKey{agent.ID(), requestID}
	c.mu.Lock()
	refused, isRefused := c.refused[key]
	msg, isAccepted := c.accepted[key]
	c.mu.Unlock()
	s := agent.Session()
	if isRefused {
		// The log can hold the record before onAppended forgets this
		// copy; its copy carries the seq and turn.
		if s != nil {
			if ev, ok := s.Outcome(requestID); ok {
				refused = ev
			}
		}
		if !sameRequest(req, refused.Message) {
			return outcome{err: requestIDReused(agent.ID(), requestID)}, true
		}
		if refused.Type == session.MessageDropped {
			// Withdrawn on its way in by a cancel (see Withdraw).
			return outcome{err: DroppedError(agent.ID(), refused)}, true
		}
		return outcome{err: RecordedRefusal(agent.ID(), refused)}, true
	}
	if isAccepted {
		if !sameRequest(req, &msg) {
			return outcome{err: requestIDReused(agent.ID(), requestID)}, true
		}
		return outcome{id: msg.ID}, true
	}
	if s == nil {
		return outcome{}, false
	}
	ev, ok := s.Outcome(requestID)
	if !ok {
		return outcome{}, false
	}
	if !sameRequest(req, ev.Message) {
		return outcome{err: requestIDReused(agent.ID(), requestID)}, true
	}
	switch ev.Type {
	case session.MessageDropped:
		return outcome{err: DroppedError(agent.ID(), ev)}, true
	case session.MessageRefused, session.MessageExpired:
		return outcome{err: RecordedRefusal(agent.ID(), ev)}, true
	}
	return outcome{id: ev.Message.ID}, true
}

// sameRequest reports whether req retries the request that became m:
// the same principal, and the same text. A message made of attachments
// keeps the text of its text parts after req's, so only its start is
// compared; the attachments themselves are not. A message a listener
// rewrote (Message.Sent) is compared by the digest of what was sent. A
// record without its
// message (none is kept) cannot be told apart and passes.
func sameRequest(req Request, m *llm.Message) bool {
	if m == nil {
		return true
	}
	var from Principal
	if m.From != nil {
		from = m.From.Principal
	}
	if from != req.Source.Principal {
		return false
	}
	if m.Sent != "" {
		return m.Sent == llm.SentDigest(req.Content)
	}
	return m.Content == req.Content || (len(m.Parts) > 0 && strings.HasPrefix(m.Content, req.Content))
}

// RecordedRefusal is the answer to a retry of a request whose message was
// refused or expired: the first refusal again — RejectedCode with its
// reason — whose message says the request id is spent. Its details name
// the outcome: "outcome" (refused or expired), "expired", "recorded"
// (true), "request_id", "message_id", and "seq" and "turn" once the
// session log holds it.
func RecordedRefusal(agentID string, ev session.Event) *errs.Error {
	kind, what := OutcomeRefused, "refused"
	if ev.Type == session.MessageExpired {
		kind, what = OutcomeExpired, "expired while it waited in the admission stage"
	}
	msgID := ""
	if ev.Message != nil {
		msgID = ev.Message.ID
	}
	e := errs.New(RejectedCode, fmt.Sprintf(
		"request %q to agent %q was %s before (%s) and is not decided again; send the message anew under a new request_id",
		ev.RequestID, agentID, what, ev.Error)).WithReason(ev.Reason)
	e.Details = map[string]any{"presented": false, "outcome": kind, "expired": kind == OutcomeExpired, "recorded": true,
		"request_id": ev.RequestID, "message_id": msgID}
	if ev.Seq > 0 {
		e.Details["seq"], e.Details["turn"] = ev.Seq, ev.Turn
	}
	return e
}

// OutcomeOf names the recorded outcome an error carries: refused or
// expired for a refusal (a first one or a retry's), dropped for
// MessageDropped, "" for anything else (a failing check, the agent or the
// controller gone: nothing is recorded and a retry is decided anew).
func OutcomeOf(err error) string {
	e, ok := errors.AsType[*errs.Error](err)
	for ok && e.Code != RejectedCode && e.Code != MessageDropped {
		e, ok = errors.AsType[*errs.Error](e.Cause)
	}
	if !ok {
		return ""
	}
	if e.Code == MessageDropped {
		return OutcomeDropped
	}
	switch e.Reason {
	case ReasonAdmissionFailed, ReasonAgentGone, ReasonStopped:
		return "" // not this message's fate: nothing is recorded
	}
	if o, _ := e.Details["outcome"].(string); o != "" {
		return o
	}
	if x, _ := e.Details["expired"].(bool); x {
		return OutcomeExpired
	}
	return OutcomeRefused
}

// noteRewrite keeps in msg the digest of the text its sender sent once
// the content is no longer that text — a listener rewrote it (a
// command's expansion), or attachments added the text of their parts:
// the record then holds other text (a refusal's record without its
// parts), and a retry, which sends the original, must still be known as
// the same request. Only messages with a request id are retried.
func noteRewrite(msg *llm.Message, req Request) {
	if req.RequestID == "" || msg.Sent != "" || msg.Content == req.Content {
		return
	}
	msg.Sent = llm.SentDigest(req.Content)
}
