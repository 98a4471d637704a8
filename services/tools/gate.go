package tools

import (
	stdctx "context"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/session"
)

// Gate is a check that runs before the approval stage's policies and whose
// refusal is final: no policy, hook or answer can lift it, because the
// policies never see the call. Plan mode is one (plugins/tools/plan): while
// a session plans, every call that is not read-only is refused here.
//
// A gate is provided under GateKey in an agent's scope (or the root's); the
// innermost one is asked.
type Gate interface {
	// Refuse returns why the call must not run, and the gate's name for
	// the record; why == "" lets the call go on to the policies.
	Refuse(ctx stdctx.Context, call Call, tool *Tool) (why, source string)
}

// GateKey is where an agent's Gate is provided.
var GateKey = dshctx.NewKey[Gate]("tools/gate")

// IsReadOnly reports whether a call of t only reads, by the tool's own
// declaration (ReadOnlyCall, else ReadOnly); why says otherwise what in it
// may write.
func IsReadOnly(t *Tool, call Call) (ok bool, why string) {
	switch {
	case t == nil:
		return false, "no such tool is registered"
	case t.ReadOnlyCall != nil:
		return t.ReadOnlyCall(call)
	case t.ReadOnly:
		return true, ""
	}
	return false, "the tool is not declared read-only"
}

// gated asks the agent's gate about call; ok false means it refused, and r
// is what the model is told.
func gated(ctx stdctx.Context, at *dshctx.Context, call Call, t *Tool) (r Result, ok bool) {
	g, ok := GateKey.Find(at)
	if !ok || g == nil {
		return Result{}, true
	}
	why, source := g.Refuse(ctx, call, t)
	if why == "" {
		return Result{}, true
	}
	record(ctx, at, call, session.StageApproval, string(Deny), why, source, "")
	return refuse("was refused%s: %s It did not run.", call.Name, by(source), why), false
}

// AskPerson asks the person attached to the call's agent whether it may go
// on, through the approval service, exactly as the approval stage asks on
// an Ask verdict (an unattended turn or nobody attached refuses, the answer
// is recorded, a denial is worded for the model) but whatever the policies
// would decide: a tool whose step needs a person's word, not a policy's
// blanket allow, calls it from its Execute (exit_plan_mode). t shows the
// call (Tool.Summary); ok says the person allowed it, else r is what the
// model is told; err ends the call when ctx ended.
func AskPerson(ctx stdctx.Context, at *dshctx.Context, call Call, t *Tool, v Verdict) (r Result, ok bool, err error) {
	v.Decision = Ask
	record(ctx, at, call, session.StageApproval, string(Ask), v.Reason, v.Source, v.PolicyVersion)
	return ask(ctx, at, call, t, v)
}
