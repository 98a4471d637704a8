package wire

import (
	"fmt"

	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// missing is the error of a payload or result without the field of its
// event: the plugin answered for another event or another protocol.
func missing(field string) error {
	return fmt.Errorf("it carries no %s; the plugin must answer with the message of the event it was called for", field)
}

// agent-controller/admission

func Admission(a agentcontroller.Admission) *pluginv1.Payload {
	return &pluginv1.Payload{Event: &pluginv1.Payload_Admission{Admission: &pluginv1.Admission{
		AgentId: a.Agent.ID(), Message: message(a.Message), Mode: string(a.Mode), Source: source(a.Source)}}}
}

// ApplyAdmission takes the message and the mode from a plugin's payload for
// next. The sender's provenance is the entry point's and stays the
// original's whatever the plugin sent: the source (principal, entry,
// on_behalf_of, kind, unattended), and the message's identity — its id,
// role, request id, unattended flag and From. The listeners after the
// plugin (policy.cel, budgets) and the decision records judge who really
// sent the message, never whom a plugin claims did.
func ApplyAdmission(orig agentcontroller.Admission, p *pluginv1.Payload) (agentcontroller.Admission, error) {
	w := p.GetAdmission()
	if w == nil {
		return orig, missing("admission")
	}
	m := messageFrom(w.GetMessage())
	o := orig.Message
	m.ID, m.Role, m.RequestID, m.Unattended, m.From = o.ID, o.Role, o.RequestID, o.Unattended, o.From
	orig.Message, orig.Mode = m, agentcontroller.Mode(w.GetMode())
	return orig, nil
}

func Decision(d agentcontroller.Decision) *pluginv1.Result {
	return &pluginv1.Result{Event: &pluginv1.Result_Decision{Decision: &pluginv1.Decision{
		Kind: string(d.Kind), Reason: d.Reason, Message: d.Message, Presented: d.Presented,
		Policy: d.Policy, PolicyVersion: d.PolicyVersion}}}
}

func DecisionFrom(_ agentcontroller.Admission, r *pluginv1.Result) (agentcontroller.Decision, error) {
	d := r.GetDecision()
	if d == nil {
		return agentcontroller.Decision{}, missing("decision")
	}
	if d.GetKind() == string(agentcontroller.DecisionReject) {
		out := agentcontroller.Reject(d.GetReason(), d.GetMessage(), d.GetPresented())
		out.Policy, out.PolicyVersion = d.GetPolicy(), d.GetPolicyVersion()
		return out, nil
	}
	return agentcontroller.Decision{Kind: agentcontroller.DecisionKind(d.GetKind()), Reason: d.GetReason(), Message: d.GetMessage(), Presented: d.GetPresented(),
		Policy: d.GetPolicy(), PolicyVersion: d.GetPolicyVersion()}, nil
}

// tools/execute

func Execution(x tools.Execution) *pluginv1.Payload {
	return &pluginv1.Payload{Event: &pluginv1.Payload_ToolExecution{ToolExecution: &pluginv1.ToolExecution{
		AgentId: x.Call.AgentID, Known: x.Tool != nil,
		Call: &pluginv1.ToolCall{Id: x.Call.ID, Name: x.Call.Name, Arguments: string(x.Call.Arguments)}}}}
}

func ApplyExecution(orig tools.Execution, p *pluginv1.Payload) (tools.Execution, error) {
	w := p.GetToolExecution()
	if w == nil {
		return orig, missing("tool_execution")
	}
	orig.Call.Arguments = []byte(w.GetCall().GetArguments())
	return orig, nil
}

func ToolResult(r tools.Result) *pluginv1.Result {
	return &pluginv1.Result{Event: &pluginv1.Result_ToolResult{ToolResult: &pluginv1.ToolResult{Content: r.Content, IsError: r.IsError}}}
}

func ToolResultFrom(_ tools.Execution, r *pluginv1.Result) (tools.Result, error) {
	w := r.GetToolResult()
	if w == nil {
		return tools.Result{}, missing("tool_result")
	}
	return tools.Result{Content: w.GetContent(), IsError: w.GetIsError()}, nil
}

// agent/request

func modelRequest(r llm.Request) *pluginv1.ModelRequest {
	return &pluginv1.ModelRequest{Provider: r.Provider, Model: r.Model, System: r.System, Messages: messages(r.History.Messages()),
		Tools: toolSpecs(r.Tools), MaxTokens: int32(r.MaxTokens), Temperature: r.Temperature}
}

// applyModelRequest makes the request a plugin described, keeping the agent
// it is for.
func applyModelRequest(orig llm.Request, w *pluginv1.ModelRequest) llm.Request {
	return llm.Request{AgentID: orig.AgentID, Provider: w.GetProvider(), Model: w.GetModel(), System: w.GetSystem(),
		History: llm.NewHistory(messagesFrom(w.GetMessages())...), Tools: toolSpecsFrom(w.GetTools()),
		MaxTokens: int(w.GetMaxTokens()), Temperature: w.Temperature}
}

func Request(e agentloop.RequestEvent) *pluginv1.Payload {
	return &pluginv1.Payload{Event: &pluginv1.Payload_Request{Request: &pluginv1.RequestEvent{
		AgentId: e.Agent.ID(), Turn: int32(e.Turn), Step: int32(e.Step), Request: modelRequest(e.Request)}}}
}

func ApplyRequest(orig agentloop.RequestEvent, p *pluginv1.Payload) (agentloop.RequestEvent, error) {
	w := p.GetRequest()
	if w == nil {
		return orig, missing("request")
	}
	orig.Request = applyModelRequest(orig.Request, w.GetRequest())
	return orig, nil
}

func RequestResult(r llm.Request) *pluginv1.Result {
	return &pluginv1.Result{Event: &pluginv1.Result_Request{Request: modelRequest(r)}}
}

func RequestResultFrom(e agentloop.RequestEvent, r *pluginv1.Result) (llm.Request, error) {
	w := r.GetRequest()
	if w == nil {
		return llm.Request{}, missing("request")
	}
	return applyModelRequest(e.Request, w), nil
}

// agent/step-result

func stepResult(r agentloop.StepResult) *pluginv1.StepResult {
	return &pluginv1.StepResult{AgentId: r.Agent.ID(), Turn: int32(r.Turn), Step: int32(r.Step),
		Message: message(r.Message), Usage: usage(r.Usage), Finish: string(r.Finish)}
}

func applyStepResult(orig agentloop.StepResult, w *pluginv1.StepResult) agentloop.StepResult {
	orig.Message, orig.Usage, orig.Finish = messageFrom(w.GetMessage()), usageFrom(w.GetUsage()), llm.FinishReason(w.GetFinish())
	return orig
}

func StepResult(r agentloop.StepResult) *pluginv1.Payload {
	return &pluginv1.Payload{Event: &pluginv1.Payload_StepResult{StepResult: stepResult(r)}}
}

func ApplyStepResult(orig agentloop.StepResult, p *pluginv1.Payload) (agentloop.StepResult, error) {
	w := p.GetStepResult()
	if w == nil {
		return orig, missing("step_result")
	}
	return applyStepResult(orig, w), nil
}

func StepResultResult(r agentloop.StepResult) *pluginv1.Result {
	return &pluginv1.Result{Event: &pluginv1.Result_StepResult{StepResult: stepResult(r)}}
}

func StepResultFrom(orig agentloop.StepResult, r *pluginv1.Result) (agentloop.StepResult, error) {
	w := r.GetStepResult()
	if w == nil {
		return orig, missing("step_result")
	}
	return applyStepResult(orig, w), nil
}

// agent/turn-continuation

func Continuation(c agentloop.Continuation) *pluginv1.Payload {
	return &pluginv1.Payload{Event: &pluginv1.Payload_Continuation{Continuation: &pluginv1.Continuation{
		AgentId: c.Agent.ID(), Turn: int32(c.Turn), Step: int32(c.Step),
		ToolCalls: int32(c.ToolCalls), Steering: int32(c.Steering), Finish: string(c.Finish)}}}
}

func ApplyContinuation(orig agentloop.Continuation, p *pluginv1.Payload) (agentloop.Continuation, error) {
	w := p.GetContinuation()
	if w == nil {
		return orig, missing("continuation")
	}
	orig.ToolCalls, orig.Steering, orig.Finish = int(w.GetToolCalls()), int(w.GetSteering()), llm.FinishReason(w.GetFinish())
	return orig, nil
}

func Continue(goOn bool) *pluginv1.Result {
	return &pluginv1.Result{Event: &pluginv1.Result_ContinueTurn{ContinueTurn: goOn}}
}

func ContinueFrom(_ agentloop.Continuation, r *pluginv1.Result) (bool, error) {
	w, ok := r.GetEvent().(*pluginv1.Result_ContinueTurn)
	if !ok {
		return false, missing("continue_turn")
	}
	return w.ContinueTurn, nil
}

// Notifications: the scope they are about and their payload.

func Inserted(in agentcontroller.Inserted) (string, *pluginv1.Payload) {
	return in.Agent.ID(), &pluginv1.Payload{Event: &pluginv1.Payload_InboxInserted{InboxInserted: &pluginv1.Admission{
		AgentId: in.Agent.ID(), Message: message(in.Message), Mode: string(in.Mode), Source: source(in.Source)}}}
}

func Status(c agents.StatusChange) (string, *pluginv1.Payload) {
	return c.Agent.ID(), &pluginv1.Payload{Event: &pluginv1.Payload_Status{Status: &pluginv1.StatusChange{
		AgentId: c.Agent.ID(), From: string(c.From), To: string(c.To)}}}
}

func StreamChunk(c agentloop.StreamChunk) (string, *pluginv1.Payload) {
	ch := &pluginv1.Chunk{Kind: c.Chunk.Kind.String(), Text: c.Chunk.Text, Signature: c.Chunk.Signature,
		Finish: string(c.Chunk.Finish), Error: c.Chunk.Error}
	if d := c.Chunk.ToolCall; d != nil {
		ch.ToolCall = &pluginv1.ToolCallDelta{Index: int32(d.Index), Id: d.ID, Name: d.Name, Arguments: d.Arguments}
	}
	if u := c.Chunk.Usage; u != nil {
		ch.Usage = usage(*u)
	}
	return c.Agent.ID(), &pluginv1.Payload{Event: &pluginv1.Payload_StreamChunk{StreamChunk: &pluginv1.StreamChunk{
		AgentId: c.Agent.ID(), Turn: int32(c.Turn), Step: int32(c.Step), MessageId: c.MessageID, Chunk: ch}}}
}

func SessionEvent(a session.Appended) (string, *pluginv1.Payload) {
	e := a.Event
	w := &pluginv1.SessionEvent{Seq: e.Seq, Type: string(e.Type), Time: timeText(e.Time), Turn: int32(e.Turn), Step: int32(e.Step),
		Finish: string(e.Finish), Reason: e.Reason, Error: e.Error, RequestId: e.RequestID}
	if e.Message != nil {
		w.Message = message(*e.Message)
	}
	if e.ToolCall != nil {
		w.ToolCall = toolCall(*e.ToolCall)
	}
	if e.Usage != nil {
		w.Usage = usage(*e.Usage)
	}
	id := a.Session.AgentID()
	return id, &pluginv1.Payload{Event: &pluginv1.Payload_SessionEvent{SessionEvent: &pluginv1.SessionAppended{
		AgentId: id, SessionId: a.Session.ID(), Event: w}}}
}
