// Package approval is the approval service: the one answerer attached to
// each agent, asked when the approval stage of a tool call says "ask".
//
// # Where it sits
//
// A tool call passes three stages (see package tools): its arguments are
// validated against the tool's schema, then tools/approve decides allow,
// deny or ask, then tools/execute runs it. Only "ask" reaches this service.
//
// # Who answers
//
// Whoever serves the agent's person attaches an Answerer with Attach: the
// interactive CLI, later an ACP client or the web page. One answerer per
// agent; a second Attach is refused until the first detaches. Asks of one
// agent reach its answerer one at a time, in the order they came, so two
// parallel calls never put two questions on one screen.
//
// # Fail closed
//
// Nobody attached (headless runs, webhooks, schedules, subagents), an
// answerer that fails, panics or answers nonsense: the call is not
// approved. Ask then returns an error with a stable code together with a
// Deny answer, so a caller that only looks at the answer refuses too. Only
// the policy (tools.permission rules, dsh run --allow, a full-access mode)
// lets such an agent run a call that asks.
//
// # Remembered answers
//
// "Allow for this session" (AllowSession) is remembered per agent and
// Request.Pattern (or the whole tool when the pattern is empty) and answers
// later asks without asking; it is forgotten when the agent is disposed.
//
// # Notifications
//
// approval/requested is emitted when the answerer is asked, and
// approval/answered once for every Ask, in the agent's scope, so a UI or a
// log can show both.
package approval

import (
	stdctx "context"
	"encoding/json"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/waterfall"
)

// Codes of the approval service.
const (
	// NoAnswerer: nobody is attached to the agent to answer, so the call
	// is not approved (fail closed).
	NoAnswerer errs.Code = "APPROVAL_NO_ANSWERER"
	// AnswererAttached: the agent already has an answerer; detach it first.
	AnswererAttached errs.Code = "APPROVAL_ANSWERER_ATTACHED"
	// AnswererFailed: the answerer returned an error, panicked or gave an
	// unknown choice; the call is not approved.
	AnswererFailed errs.Code = "APPROVAL_ANSWERER_FAILED"
)

// Request is one question for a person: may this call run?
type Request struct {
	AgentID   string          `json:"agent_id"`
	CallID    string          `json:"call_id,omitempty"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Summary shows the call to a person, such as bash's command line.
	Summary string `json:"summary,omitempty"`
	// Reason says why the policy asks.
	Reason string `json:"reason,omitempty"`
	// Pattern is what AllowSession covers (see tools.Verdict.Pattern).
	Pattern string `json:"pattern,omitempty"`
	// Source names the policy that asks (tools.Verdict.Source), so an
	// answerer can tell whose question it answers: dsh run's --yolo
	// answers a policy's ask but not a hook's.
	Source string `json:"source,omitempty"`
}

// Choice is a person's answer.
type Choice string

// Choices.
const (
	AllowOnce    Choice = "allow-once"
	AllowSession Choice = "allow-session"
	Deny         Choice = "deny"
)

// Answer is a person's answer to a Request.
type Answer struct {
	Choice Choice `json:"choice"`
	// Reason goes to the model with a denial.
	Reason string `json:"reason,omitempty"`
	// Unattended: no person answered; an answerer that stands in for
	// nobody (dsh run -p) denied because there was nobody to ask. The
	// model is told that, not that a user refused.
	Unattended bool `json:"unattended,omitempty"`
}

// Allowed reports whether the answer lets the call run.
func (a Answer) Allowed() bool { return a.Choice == AllowOnce || a.Choice == AllowSession }

// Answerer answers requests for one agent. It is called for one request
// at a time and must return when ctx ends (the call was cancelled, or the
// answerer was detached).
type Answerer func(ctx stdctx.Context, req Request) (Answer, error)

// Answered is the payload of approval/answered.
type Answered struct {
	Request Request
	// Answer is what the call got; a Deny when Err is set.
	Answer Answer
	// Remembered: an earlier "allow for this session" answered, nobody
	// was asked.
	Remembered bool
	// Err says why nobody answered: APPROVAL_NO_ANSWERER,
	// APPROVAL_ANSWERER_FAILED, or the cancellation of the call.
	Err error
}

// Notifications of the approval service, emitted in the agent's scope.
var (
	// EventRequested: the agent's answerer is being asked req.
	EventRequested = waterfall.NewEmit[Request]("approval/requested")
	// EventAnswered: an Ask ended, answered or not.
	EventAnswered = waterfall.NewEmit[Answered]("approval/answered")
)
