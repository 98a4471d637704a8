package tools

import (
	"bytes"
	stdctx "context"
	"encoding/json"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/session"
)

// Verdicts of approval and answer records beyond the stage's own
// decisions (allow, deny, ask).
const (
	// VerdictError: the approval stage failed, which refuses the call.
	VerdictError = "error"
)

// Who answered an Ask, as an answer record's Policy names it.
const (
	// AnsweredByPerson: the answerer attached to the agent (a person at
	// the terminal, an editor, the web page) answered.
	AnsweredByPerson = "person"
	// AnsweredByNobody: nobody could be asked — an unattended turn, no
	// answerer attached, or an answerer standing in for nobody.
	AnsweredByNobody = "nobody"
)

// callInputs is what an approval record's Inputs digest covers: the call
// as the stage judged it and what is known of who it runs for.
type callInputs struct {
	Agent      string          `json:"agent"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	Unattended bool            `json:"unattended,omitempty"`
}

// CallInputs is the Inputs digest of an approval or answer record for
// call: its agent, tool, arguments (compacted) and whether its turn is
// unattended.
func CallInputs(call Call) string {
	var b bytes.Buffer
	args := call.Arguments
	if json.Compact(&b, args) == nil {
		args = b.Bytes()
	}
	return session.InputsDigest(callInputs{Agent: call.AgentID, Tool: call.Name, Arguments: args, Unattended: call.Unattended})
}

// record emits a decision record about call in at's scope: the approval
// stage's verdict or an answer to its Ask. The agent loop appends it to
// the agent's session before the call's result, whichever policy decided.
func record(ctx stdctx.Context, at *dshctx.Context, call Call, stage, verdict, reason, policy, version string) {
	agentID := call.AgentID
	if agentID == "" {
		agentID = at.Tag()
	}
	session.EventDecision.Emit(ctx, at, session.Decided{AgentID: agentID, Decision: session.Decision{
		Stage: stage, Verdict: verdict, Reason: reason, Policy: policy, PolicyVersion: version,
		Inputs: CallInputs(call), CallID: call.ID, Tool: call.Name,
	}})
}
