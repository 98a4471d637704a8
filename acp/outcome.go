package acp

import (
	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/sessions"
)

// MetaOutcome is the _meta key of a prompt's answer that says what became
// of the prompt: sessions.RequestOutcome as JSON (outcome delivered,
// merged or dropped; turn, seq, request_id, message_id). A refused or
// expired prompt answers an error instead, whose data carries "outcome".
const MetaOutcome = "dsh.dev/outcome"

// withOutcome adds the prompt's recorded outcome to its answer, when there
// is one.
func withOutcome(r acp.PromptResponse, o sessions.RequestOutcome) acp.PromptResponse {
	if o.Outcome == "" {
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
func (st *conv) droppedAnswer(rid string, err error) (acp.PromptResponse, bool) {
	if !errs.HasCode(err, sessions.MessageDropped) {
		return acp.PromptResponse{}, false
	}
	r := acp.PromptResponse{StopReason: acp.StopReasonCancelled}
	if o, ok, oerr := st.srv.opts.Sessions.Outcome(st.ctx, string(st.id), rid); oerr == nil && ok {
		r = withOutcome(r, o)
	}
	return r, true
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
