// Package approval is the approval service: the one answerer attached to
// each agent, asked when the approval stage of a tool call says "ask".
//
// SKELETON: the API below is the contract; the approve branch implements it.
package approval

import (
	stdctx "context"
	"encoding/json"

	dshctx "github.com/dsh-go/dsh/context"
)

// Request is one question for a person: may this call run?
type Request struct {
	AgentID   string
	CallID    string
	Tool      string
	Arguments json.RawMessage
	// Summary shows the call to a person, such as bash's command line.
	Summary string
	// Reason says why the policy asks.
	Reason string
	// Pattern is what AllowSession covers (see tools.Verdict.Pattern).
	Pattern string
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
	Choice Choice
	// Reason goes to the model with a denial.
	Reason string
}

// Answerer answers requests for one agent. It is called for one request
// at a time and must return when ctx ends.
type Answerer func(ctx stdctx.Context, req Request) (Answer, error)

// Key is the service key.
var Key = dshctx.NewKey[*Service]("approval")

// Service holds the answerer of each agent.
type Service struct{}

// Attach makes a the answerer of agentID until detach is called.
func (s *Service) Attach(agentID string, a Answerer) (detach func(), err error) {
	panic("skeleton")
}

// Ask asks agentID's answerer; with none attached it fails closed.
func (s *Service) Ask(ctx stdctx.Context, req Request) (Answer, error) {
	panic("skeleton")
}
