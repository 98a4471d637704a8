package wire

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
)

// tools/approve

func approvalMessage(a tools.Approval) *pluginv1.Approval {
	w := &pluginv1.Approval{AgentId: a.Call.AgentID, Workspace: a.Call.Workspace, Unattended: a.Call.Unattended,
		Call:        &pluginv1.ToolCall{Id: a.Call.ID, Name: a.Call.Name, Arguments: string(a.Call.Arguments)},
		ToolDefault: string(tools.Allow), Sources: provenances(a.Call.Sources)}
	if a.Tool != nil {
		w.ParallelSafe = a.Tool.ParallelSafe
		if a.Tool.Approval != "" {
			w.ToolDefault = string(a.Tool.Approval)
		}
	}
	return w
}

func Approval(a tools.Approval) *pluginv1.Payload {
	return &pluginv1.Payload{Event: &pluginv1.Payload_Approval{Approval: approvalMessage(a)}}
}

// ApplyApproval takes the call's arguments from a plugin's payload for
// next; nothing else of an approval is the plugin's to change.
func ApplyApproval(orig tools.Approval, p *pluginv1.Payload) (tools.Approval, error) {
	w := p.GetApproval()
	if w == nil {
		return orig, missing("approval")
	}
	args := w.GetCall().GetArguments()
	if args != string(orig.Call.Arguments) {
		if !json.Valid([]byte(args)) {
			return orig, fmt.Errorf("the call.arguments it passed to next are not JSON: %q", clip(args))
		}
		orig.Call.Arguments = json.RawMessage(args)
	}
	return orig, nil
}

func Verdict(v tools.Verdict) *pluginv1.Result {
	return &pluginv1.Result{Event: &pluginv1.Result_Verdict{Verdict: &pluginv1.Verdict{
		Decision: string(v.Decision), Reason: v.Reason, Pattern: v.Pattern, Source: v.Source, Arguments: string(v.Arguments),
		PolicyVersion: v.PolicyVersion}}}
}

// VerdictFrom reads a plugin's verdict. A decision other than allow, deny
// or ask, or arguments that are not JSON, are errors: the approval stage
// then refuses the call rather than guess.
func VerdictFrom(_ tools.Approval, r *pluginv1.Result) (tools.Verdict, error) {
	w := r.GetVerdict()
	if w == nil {
		return tools.Verdict{}, missing("verdict")
	}
	v := tools.Verdict{Decision: tools.Decision(w.GetDecision()), Reason: w.GetReason(), Pattern: w.GetPattern(), Source: w.GetSource(),
		PolicyVersion: w.GetPolicyVersion()}
	switch v.Decision {
	case tools.Allow, tools.Deny, tools.Ask:
	default:
		return v, fmt.Errorf("its verdict's decision is %q; it must be allow, deny or ask", w.GetDecision())
	}
	if args := strings.TrimSpace(w.GetArguments()); args != "" {
		if !json.Valid([]byte(args)) {
			return v, fmt.Errorf("its verdict's arguments are not JSON: %q", clip(args))
		}
		v.Arguments = json.RawMessage(args)
	}
	return v, nil
}

// clip shortens a plugin's text quoted in an error.
func clip(s string) string {
	const most = 120
	if len(s) <= most {
		return s
	}
	return strings.ToValidUTF8(s[:most], "") + "…"
}

// Notifications of the session controller and the approval service.

// SessionOutcome is session/outcome.
func SessionOutcome(o sessions.Outcome) (string, *pluginv1.Payload) {
	return o.AgentID, &pluginv1.Payload{Event: &pluginv1.Payload_SessionOutcome{SessionOutcome: &pluginv1.SessionOutcome{
		AgentId: o.AgentID, SessionId: o.Session, Type: string(o.Kind), RequestId: o.RequestID, Code: string(o.Code),
		Reason: o.Reason, Message: o.Message, Presented: o.Presented, Time: timeText(o.At)}}}
}

func approvalRequest(r approval.Request) *pluginv1.ApprovalRequest {
	return &pluginv1.ApprovalRequest{AgentId: r.AgentID, CallId: r.CallID, Tool: r.Tool, Arguments: string(r.Arguments),
		Summary: r.Summary, Reason: r.Reason, Pattern: r.Pattern}
}

// ApprovalRequested is approval/requested.
func ApprovalRequested(r approval.Request) (string, *pluginv1.Payload) {
	return r.AgentID, &pluginv1.Payload{Event: &pluginv1.Payload_ApprovalRequested{ApprovalRequested: approvalRequest(r)}}
}

// ApprovalAnswered is approval/answered.
func ApprovalAnswered(a approval.Answered) (string, *pluginv1.Payload) {
	w := &pluginv1.ApprovalAnswered{Request: approvalRequest(a.Request), Choice: string(a.Answer.Choice),
		Reason: a.Answer.Reason, Remembered: a.Remembered}
	if a.Err != nil {
		w.ErrorCode, w.Error = string(errs.CodeOf(a.Err)), a.Err.Error()
	}
	return a.Request.AgentID, &pluginv1.Payload{Event: &pluginv1.Payload_ApprovalAnswered{ApprovalAnswered: w}}
}
