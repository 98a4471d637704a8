package agentcontroller

import (
	"errors"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// RejectedCode marks every refusal of a delivery, whatever its reason.
const RejectedCode errs.Code = "AGENT_ADMISSION_REJECTED"

// The fixed reasons the controller itself gives.
const (
	// ReasonAdmissionFailed: an admission listener returned an error or
	// panicked; the failure is the cause.
	ReasonAdmissionFailed = "agent-controller/admission-failed"
	// ReasonAgentGone: the agent left the registry before the message
	// entered its inbox.
	ReasonAgentGone = "agent-controller/agent-gone"
	// ReasonStopped: the controller was disposed before the message entered
	// the inbox.
	ReasonStopped = "agent-controller/stopped"
)

// AgentAdmissionRejected builds the refusal error: code RejectedCode, the
// reason, the message for the sender, and whether it was presented.
func AgentAdmissionRejected(reason, message string, presented bool, cause error) *errs.Error {
	e := errs.Wrap(RejectedCode, cause, message).WithReason(reason)
	e.Details = map[string]any{"presented": presented}
	return e
}

// expiredRefusal is a refusal of a message whose wait ran out: its
// details say "expired" and its outcome is recorded as message/expired.
func expiredRefusal(reason, message string, presented bool) *errs.Error {
	e := AgentAdmissionRejected(reason, message, presented, nil)
	e.Details["expired"] = true
	e.Details["outcome"] = OutcomeExpired
	return e
}

// IsRejected reports whether err is a refusal of a delivery. It matches by
// code, so it also holds for an error that crossed a process boundary.
func IsRejected(err error) bool { return errs.HasCode(err, RejectedCode) }

// Refusal is what a sender needs to report a refusal.
type Refusal struct {
	Reason    string
	Message   string
	Presented bool
	// Expired says the message waited in the admission stage until its
	// limit ran out, rather than being turned down by a check.
	Expired bool
}

// RefusalOf extracts the refusal from err, recognizing it by code.
func RefusalOf(err error) (Refusal, bool) {
	e, ok := errors.AsType[*errs.Error](err)
	for ok && e.Code != RejectedCode {
		e, ok = errors.AsType[*errs.Error](e.Cause)
	}
	if !ok {
		return Refusal{}, false
	}
	presented, _ := e.Details["presented"].(bool)
	expired, _ := e.Details["expired"].(bool)
	return Refusal{Reason: e.Reason, Message: e.Message, Presented: presented, Expired: expired}, true
}

func agentGone(id string) *errs.Error {
	return AgentAdmissionRejected(ReasonAgentGone,
		fmt.Sprintf("agent %q left before the message entered its inbox", id), false, nil)
}

func stopped() *errs.Error {
	return AgentAdmissionRejected(ReasonStopped,
		"the agent controller stopped before the message entered the inbox", false, nil)
}

// MessageDropped answers a retry of a request whose message was accepted
// and later dropped from the inbox (a cancel, the session's close): the
// retry is told what happened rather than accepted again, and the sender
// decides whether to send it anew, under a new request id. Details carry
// "message_id", "request_id", "turn", "dropped" (cancelled or closed) and
// "by".
const MessageDropped errs.Code = "AGENT_MESSAGE_DROPPED"

// RequestIDReused refuses a request id that an agent already took for
// another message: sent by another principal, or with other text. Its
// message names neither the other sender nor what they sent.
const RequestIDReused errs.Code = "AGENT_REQUEST_ID_REUSED"

func requestIDReused(agentID, requestID string) *errs.Error {
	e := errs.New(RequestIDReused, fmt.Sprintf(
		"request_id %q was already used for another message to agent %q (by another caller, or with other text); a request_id names one message: send a retry with the same text, and a new message under a new request_id", requestID, agentID))
	e.Details = map[string]any{"request_id": requestID}
	return e
}

// ReasonDropped goes with MessageDropped.
const ReasonDropped = "agent-controller/dropped"

// DroppedError describes the recorded drop of a retried request, for a
// sender that answers retries from its own memory (webhooks).
func DroppedError(agentID string, ev session.Event) *errs.Error {
	msgID := ""
	if ev.Message != nil {
		msgID = ev.Message.ID
	}
	e := errs.New(MessageDropped, fmt.Sprintf(
		"request %q was accepted as message %s and then dropped (%s by %s, during turn %d of agent %q) without reaching a turn; send it again under a new request_id to deliver it",
		ev.RequestID, msgID, ev.Reason, ev.By, ev.Turn, agentID)).WithReason(ReasonDropped)
	e.Details = map[string]any{"message_id": msgID, "request_id": ev.RequestID, "turn": ev.Turn, "dropped": ev.Reason, "by": ev.By}
	return e
}
