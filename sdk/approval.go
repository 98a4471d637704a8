package sdk

import (
	stdctx "context"

	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// ApprovalEvent is the host's approval stage: every tool call whose
// arguments are valid, before it runs.
const ApprovalEvent = "tools/approve"

type (
	// Approval is the payload of tools/approve.
	Approval = pluginv1.Approval
	// Verdict is the approval stage's answer for one call. Arguments, when
	// set, replace the call's (JSON text); the host validates them against
	// the tool's schema again before the call runs.
	Verdict = pluginv1.Verdict
)

// Allow lets the call run.
func Allow() *Verdict { return &Verdict{Decision: "allow"} }

// DenyCall refuses the call; the model is told reason.
func DenyCall(reason string) *Verdict { return &Verdict{Decision: "deny", Reason: reason} }

// Ask hands the call to the person attached to the agent, saying why. With
// nobody attached, or an unattended turn, the host refuses the call.
func Ask(reason string) *Verdict { return &Verdict{Decision: "ask", Reason: reason} }

// ApprovalNext asks the policies after this one, ending with the tool's
// own default, with a (possibly changed) approval. Only the call's
// arguments can change; a call passed on with changed arguments runs with
// them unless a later policy rewrites or refuses it.
type ApprovalNext func(ctx stdctx.Context, a *Approval) (*Verdict, error)

// Approval listens to tools/approve with typed values: decide by returning
// Allow, DenyCall or Ask without calling next, or defer to the policies
// after this one by returning next's verdict. A verdict without Source is
// attributed to this plugin by the host. An error, like a plugin that is
// down, denies the call: an approval policy fails closed.
func (p *Plugin) Approval(fn func(ctx stdctx.Context, a *Approval, next ApprovalNext) (*Verdict, error), opts ...Option) {
	p.Waterfall(ApprovalEvent, func(ctx stdctx.Context, call Call, next Next) (*pluginv1.Result, error) {
		a := call.Payload.GetApproval()
		if a == nil {
			return nil, badPayload(call, "approval")
		}
		original := a.GetCall().GetArguments()
		v, err := fn(ctx, a, func(ctx stdctx.Context, changed *Approval) (*Verdict, error) {
			var payload *pluginv1.Payload
			if changed.GetCall().GetArguments() != original {
				payload = &pluginv1.Payload{Event: &pluginv1.Payload_Approval{Approval: changed}}
			}
			out, err := next(ctx, payload)
			if err != nil {
				return nil, err
			}
			return out.GetVerdict(), nil
		})
		if err != nil {
			return nil, err
		}
		return &pluginv1.Result{Event: &pluginv1.Result_Verdict{Verdict: v}}, nil
	}, opts...)
}
