package tools

import (
	stdctx "context"

	"github.com/dsh-go/dsh/waterfall"
)

// Approval is the payload of tools/approve: a call whose arguments have
// been validated, and the tool it would run.
type Approval struct {
	Call Call
	Tool *Tool
}

// Verdict is the approval stage's answer for one call.
type Verdict struct {
	Decision Decision
	// Reason says why; for Deny it is what the model is told.
	Reason string
	// Pattern is what an "allow for this session" answer to an Ask
	// covers, such as a bash command's program name; "" means the tool.
	Pattern string
	// Source names the policy that decided ("" for the tool's default),
	// so a policy can tell another policy's decision from the default.
	Source string
}

// EventApprove decides whether a call may run, before tools/execute.
// Policy plugins listen to it; the default is the tool's own Approval
// (Allow when it declares none).
var EventApprove = waterfall.New("tools/approve", defaultVerdict)

// Listener signatures of tools/approve.
type (
	// ApproveListener decides, or passes the call on with next.
	ApproveListener = waterfall.Listener[Approval, Verdict]
	// ApproveNext asks the policies after this one, ending with the
	// tool's default.
	ApproveNext = waterfall.Next[Approval, Verdict]
)

func defaultVerdict(_ stdctx.Context, a Approval) (Verdict, error) {
	if a.Tool == nil || a.Tool.Approval == "" {
		return Verdict{Decision: Allow}, nil
	}
	return Verdict{Decision: a.Tool.Approval}, nil
}
