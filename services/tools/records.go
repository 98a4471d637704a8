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

// CallInputs is the Inputs digest of an approval or answer record for
// call: the call as the stage judged it, every field of Call — its agent,
// id, tool, arguments (compacted), workspace, whether its turn is
// unattended and whatever provenance it carries — so a field Call gains
// is covered without touching this.
func CallInputs(call Call) string {
	var b bytes.Buffer
	if json.Compact(&b, call.Arguments) == nil {
		call.Arguments = b.Bytes()
	}
	return session.InputsDigest(call)
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
