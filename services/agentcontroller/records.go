package agentcontroller

import (
	stdctx "context"
	"encoding/binary"
	"sync"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/telemetry"
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

// AdmissionInputs is the Inputs digest of an admission record for msg,
// sent to agentID with mode from src: "sha256:" and the hex sha256 of
// the fields below, each as its length in bytes (uvarint) and its bytes —
// a tag naming the encoding, the agent, the mode, the content, each
// part's type, media type, name, reference, text and size, then the
// sender's kind, rpc id, unattended flag, principal (kind, id, tenant),
// entry point and on-behalf-of principal. Written by hand rather than as
// JSON: it runs for every message.
func AdmissionInputs(agentID string, mode Mode, msg llm.Message, src Source) string {
	bp := inputsBuf.Get().(*[]byte)
	b := (*bp)[:0]
	field := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	flag := func(v bool) {
		if v {
			field("1")
		} else {
			field("0")
		}
	}
	principal := func(p *Principal) {
		flag(p != nil)
		if p != nil {
			field(p.Kind)
			field(p.ID)
			field(p.Tenant)
		}
	}
	field("dsh-admission-inputs/1")
	field(agentID)
	field(string(mode))
	field(msg.Content)
	b = binary.AppendUvarint(b, uint64(len(msg.Parts)))
	for _, p := range msg.Parts {
		field(string(p.Type))
		field(p.MediaType)
		field(p.Name)
		field(p.Ref)
		field(p.Text)
		b = binary.AppendUvarint(b, uint64(p.Size))
	}
	field(string(src.Kind))
	field(src.RPCID)
	flag(src.Unattended)
	principal(&src.Principal)
	field(src.Entry)
	principal(src.OnBehalfOf)
	d := session.DigestOf(b)
	*bp = b
	inputsBuf.Put(bp)
	return d
}

// inputsBuf holds the buffers AdmissionInputs encodes into.
var inputsBuf = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// recordDecision emits the record of an admission decision about msg in
// the agent's scope (session/decision), where the agent's loop appends it
// to the session log. It runs for every decision the stage makes, whoever
// made it: a plugin records nothing itself. At debug level it is also a
// log line, which carries the admission's trace and span ids (ctx's).
func (c *Controller) recordDecision(ctx stdctx.Context, agent agents.Agent, msg llm.Message, req Request, verdict, reason, policy, version string) {
	if l := agent.Context().Logger(); l.IsDebug() {
		// The message's content stays out: it may hold what a sender
		// would not have logged.
		telemetry.Logger(ctx, l).Debug("admission decided", "agent", agent.ID(), "request_id", req.RequestID, "message_id", msg.ID,
			"verdict", verdict, "reason", reason, "policy", policy)
	}
	if !session.EventDecision.Heard(agent.Context()) {
		return // nobody records this agent's decisions: build nothing
	}
	session.EventDecision.Emit(c.stop, agent.Context(), session.Decided{AgentID: agent.ID(), Decision: session.Decision{
		Stage: session.StageAdmission, Verdict: verdict, Reason: reason, Policy: policy, PolicyVersion: version,
		Inputs:    AdmissionInputs(agent.ID(), req.Mode, msg, req.Source),
		RequestID: req.RequestID, MessageID: msg.ID, Mode: string(req.Mode), Source: SenderOf(req.Source),
	}, WithOutcome: outcomeFollows(req, verdict, reason)})
}

// outcomeFollows says whether recordRefusal hands an outcome event over
// right after the decision record of this verdict: it records a refusal
// or an expiry of a request with an id, unless its reason is one that is
// not the message's fate (see recordable). The agent then writes the
// record with its outcome, or neither if its log is let go in between.
func outcomeFollows(req Request, verdict, reason string) bool {
	if req.RequestID == "" || (verdict != VerdictRefuse && verdict != VerdictExpire) {
		return false
	}
	switch reason {
	case ReasonAdmissionFailed, ReasonAgentGone, ReasonStopped:
		return false
	}
	return true
}

// recordFailure records the refusal err carries, when it is a decision
// about this message (a check refused it, its wait ran out, or a check
// failed) rather than the sender leaving or the agent or controller going.
func (c *Controller) recordFailure(ctx stdctx.Context, agent agents.Agent, msg llm.Message, req Request, err error) {
	r, ok := RefusalOf(err)
	if !ok {
		return
	}
	switch r.Reason {
	case ReasonAgentGone, ReasonStopped:
		return
	case ReasonAdmissionFailed:
		c.recordDecision(ctx, agent, msg, req, VerdictError, r.Reason, "", "")
		return
	}
	verdict := VerdictRefuse
	if r.Expired {
		verdict = VerdictExpire
	}
	c.recordDecision(ctx, agent, msg, req, verdict, r.Reason, "", "")
}

// SenderOf is src as a decision record keeps it.
func SenderOf(src Source) *session.Sender {
	s := &session.Sender{Kind: string(src.Kind), RPCID: src.RPCID, Unattended: src.Unattended, Entry: src.Entry}
	if !src.Principal.IsZero() {
		p := src.Principal
		s.Principal = &p
	}
	if p := src.OnBehalfOf; p != nil {
		c := *p
		s.OnBehalfOf = &c
	}
	return s
}
