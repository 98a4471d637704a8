package sessions

import (
	"errors"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
)

// Codes of the session controller. They are stable: clients on the other
// side of a process boundary match them as strings.
const (
	// PromptRejected: admission refused a prompt or a steering message.
	// Reason is the controller's or the refusing plugin's reason; Details
	// carry "presented" (the refusal was already shown to the user) and
	// "request_id".
	PromptRejected errs.Code = "SESSION_PROMPT_REJECTED"
	// Closed: the session is closed or closing and takes nothing more.
	Closed errs.Code = "SESSION_CLOSED"
	// NotFound: no open session has the id. (The store's SESSION_NOT_FOUND,
	// the same string, says nothing is persisted under it either.)
	NotFound errs.Code = "SESSION_NOT_FOUND"
	// Stopped: the session controller is disposed and opens nothing more.
	Stopped errs.Code = "SESSION_CONTROLLER_STOPPED"
)

// Reasons that go with the codes above, when the controller itself decides.
const (
	// ReasonOpenHere goes with the store's SESSION_LOCKED when the session
	// is already open in this controller: attach to it instead.
	ReasonOpenHere = "sessions/open-here"
	// ReasonClosingHere goes with SESSION_LOCKED when the session is still
	// closing here: a Close was cut short by its context. Close it again.
	ReasonClosingHere = "sessions/closing-here"
	// ReasonAgentGone goes with Closed when the session's agent left before
	// the message entered its inbox.
	ReasonAgentGone = "sessions/agent-gone"
	// ReasonControllerStopped goes with Closed when the agent controller
	// stopped before the message entered the inbox.
	ReasonControllerStopped = "sessions/agent-controller-stopped"
	// ReasonClosedUndecided goes with Closed when Wait saw the session
	// close before the request it waits for was decided.
	ReasonClosedUndecided = "sessions/closed-undecided"
)

// closedReasonOf maps the agent controller's own refusals that mean "this
// session cannot take messages any more" to a Closed reason. It names the
// controller's constants, so a renamed or removed one fails the build, and
// two that became equal fail it too (duplicate case).
func closedReasonOf(controllerReason string) (string, bool) {
	switch controllerReason {
	case agentcontroller.ReasonAgentGone:
		return ReasonAgentGone, true
	case agentcontroller.ReasonStopped:
		return ReasonControllerStopped, true
	case agentcontroller.ReasonAdmissionFailed:
		// A failing admission check is a refusal of this prompt, not of
		// the session: the next prompt may pass.
		return "", false
	}
	return "", false
}

// DeliveryError turns what agentcontroller.Deliver returned for a prompt
// of session sessionID into the session's error. A refusal — recognized by
// agentcontroller.RejectedCode, so it holds for an error decoded from JSON
// after crossing a process or host boundary — becomes PromptRejected
// carrying the controller's reason, message and presented flag, or Closed
// when the refusal says the agent or controller is gone. Any other error is
// returned unchanged. The original error stays the cause.
func DeliveryError(sessionID, requestID string, err error) error {
	ref, ok := agentcontroller.RefusalOf(err)
	if !ok {
		return err
	}
	if reason, closed := closedReasonOf(ref.Reason); closed {
		return errs.Wrap(Closed, err, fmt.Sprintf(
			"session %q cannot take the message: %s; open or resume the session again", sessionID, ref.Message)).WithReason(reason)
	}
	e := errs.Wrap(PromptRejected, err, ref.Message).WithReason(ref.Reason)
	e.Details = map[string]any{"presented": ref.Presented, "request_id": requestID, "session": sessionID}
	// The outcome travels with the refusal: a first refusal says refused
	// or expired, a retry's also where the log recorded it.
	if f := fateOfError(err); f != "" {
		e.Details["outcome"] = string(f)
	}
	if c, ok := errors.AsType[*errs.Error](err); ok {
		for _, k := range outcomeDetails {
			if v, ok := c.Details[k]; ok && k != "outcome" {
				e.Details[k] = v
			}
		}
	}
	return e
}

// Rejection is what a client needs to report a rejected prompt.
type Rejection struct {
	Reason    string
	Message   string
	Presented bool
	RequestID string
	// Outcome is refused or expired. Recorded says the answer is a
	// retry's, read from the record of the first attempt; Seq and Turn
	// then place that record in the log once it is written.
	Outcome  Fate
	Recorded bool
	Seq      int64
	Turn     int
}

// RejectionOf extracts a rejected prompt from err by code, so it also holds
// for an error that crossed a process boundary.
func RejectionOf(err error) (Rejection, bool) {
	e, ok := errors.AsType[*errs.Error](err)
	for ok && e.Code != PromptRejected {
		e, ok = errors.AsType[*errs.Error](e.Cause)
	}
	if !ok {
		return Rejection{}, false
	}
	presented, _ := e.Details["presented"].(bool)
	requestID, _ := e.Details["request_id"].(string)
	r := Rejection{Reason: e.Reason, Message: e.Message, Presented: presented, RequestID: requestID}
	outcome, _ := e.Details["outcome"].(string)
	r.Outcome = Fate(outcome)
	r.Recorded, _ = e.Details["recorded"].(bool)
	r.Seq, r.Turn = int64(number(e.Details["seq"])), int(number(e.Details["turn"]))
	return r, true
}

// number reads a detail that is a number in memory, or a float64 after it
// crossed a process boundary as JSON.
func number(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

func notFound(id string) *errs.Error {
	return errs.New(NotFound, fmt.Sprintf("no session %q is open in this session controller; open or resume it first (List shows the persisted ones)", id))
}

func closedErr(id string) *errs.Error {
	return errs.New(Closed, fmt.Sprintf("session %q is closed; resume it to continue", id))
}

func stoppedErr() *errs.Error {
	return errs.New(Stopped, "the session controller was disposed; nothing more can be opened through it")
}

// Codes of the layers below that entry points map (to an HTTP status, an
// exit code), re-exported so that they need no agent package.
const (
	// MessageDropped: a retry of a request whose message a cancel or a
	// close dropped (see DroppedError).
	MessageDropped = agentcontroller.MessageDropped
	// RequestIDReused: a request id already taken for another message
	// (another sender, or other text).
	RequestIDReused = agentcontroller.RequestIDReused
	// AgentExists: an agent id is taken by a live agent.
	AgentExists = agents.AgentExists
)

// FateOf names the outcome a delivery error reports ("refused",
// "expired", "dropped"), "" when it reports none.
func FateOf(err error) Fate { return fateOfError(err) }
