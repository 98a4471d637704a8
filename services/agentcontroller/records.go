package agentcontroller

import (
	"encoding/json"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// Verdicts of an admission decision record.
const (
	VerdictAdmit  = "admit"
	VerdictRefuse = "refuse"
	VerdictExpire = "expire"
	// VerdictError: the stage failed (a listener returned an error),
	// which refuses the message.
	VerdictError = "error"
)

// admissionInputs is what an admission record's Inputs digest covers:
// the message as the stage judged it (its parts by reference) and who
// sent it how.
type admissionInputs struct {
	Agent   string     `json:"agent"`
	Mode    Mode       `json:"mode"`
	Content string     `json:"content"`
	Parts   []llm.Part `json:"parts,omitempty"`
	Source  Source     `json:"source"`
}

// AdmissionInputs is the Inputs digest of an admission record for msg,
// sent to agentID with mode from src.
func AdmissionInputs(agentID string, mode Mode, msg llm.Message, src Source) string {
	return session.InputsDigest(admissionInputs{Agent: agentID, Mode: mode, Content: msg.Content, Parts: msg.Parts, Source: src})
}

// recordDecision emits the record of an admission decision about msg in
// the agent's scope (session/decision), where the agent's loop appends it
// to the session log. It runs for every decision the stage makes, whoever
// made it: a plugin records nothing itself.
func (c *Controller) recordDecision(agent agents.Agent, msg llm.Message, req Request, verdict, reason, policy, version string) {
	src, _ := json.Marshal(req.Source)
	session.EventDecision.Emit(c.stop, agent.Context(), session.Decided{AgentID: agent.ID(), Decision: session.Decision{
		Stage: session.StageAdmission, Verdict: verdict, Reason: reason, Policy: policy, PolicyVersion: version,
		Inputs:    AdmissionInputs(agent.ID(), req.Mode, msg, req.Source),
		RequestID: req.RequestID, MessageID: msg.ID, Mode: string(req.Mode), Source: src,
	}})
}

// recordFailure records the refusal err carries, when it is a decision
// about this message (a check refused it, its wait ran out, or a check
// failed) rather than the sender leaving or the agent or controller going.
func (c *Controller) recordFailure(agent agents.Agent, msg llm.Message, req Request, err error) {
	r, ok := RefusalOf(err)
	if !ok {
		return
	}
	switch r.Reason {
	case ReasonAgentGone, ReasonStopped:
		return
	case ReasonAdmissionFailed:
		c.recordDecision(agent, msg, req, VerdictError, r.Reason, "", "")
		return
	}
	verdict := VerdictRefuse
	if r.Expired {
		verdict = VerdictExpire
	}
	c.recordDecision(agent, msg, req, verdict, r.Reason, "", "")
}
