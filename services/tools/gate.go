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
	g, err := GateKey.Get(at)
	if err != nil || g == nil {
		return Result{}, true
	}
	why, source := g.Refuse(ctx, call, t)
	if why == "" {
		return Result{}, true
	}
	record(ctx, at, call, session.StageApproval, string(Deny), why, source, "")
	return refuse("was refused%s: %s It did not run.", call.Name, by(source), why), false
}
