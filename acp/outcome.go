package acp

import (
	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
)

// MetaOutcome is the _meta key of a prompt's answer that says what became
// of the prompt: sessions.RequestOutcome as JSON (outcome delivered,
// merged or dropped; turn, seq, request_id, message_id). A refused or
// expired prompt answers an error instead, whose data carries "outcome".
const MetaOutcome = "dsh.dev/outcome"

// withOutcome adds the prompt's recorded outcome to its answer, when the
// log holds it.
func withOutcome(st *conv, rid string, r acp.PromptResponse) acp.PromptResponse {
	o, ok := st.s.RequestOutcome(rid)
	if !ok {
		return r
	}
	if r.Meta == nil {
		r.Meta = map[string]any{}
	}
	r.Meta[MetaOutcome] = o
	return r
}

// droppedAnswer answers a retried prompt whose first attempt a cancel
// dropped as that attempt was answered: cancelled, now with the outcome.
// ok is false for any other error.
func droppedAnswer(st *conv, rid string, err error) (acp.PromptResponse, bool) {
	if !errs.HasCode(err, agentcontroller.MessageDropped) {
		return acp.PromptResponse{}, false
	}
	return withOutcome(st, rid, acp.PromptResponse{StopReason: acp.StopReasonCancelled}), true
}

// refusalData adds a refused prompt's outcome to its error data.
func refusalData(d map[string]any, r sessions.Rejection) {
	if r.Outcome == "" {
		return
	}
	d["outcome"] = string(r.Outcome)
	if r.Recorded {
		d["recorded"] = true
	}
	if r.Seq > 0 {
		d["seq"], d["turn"] = r.Seq, r.Turn
	}
}
