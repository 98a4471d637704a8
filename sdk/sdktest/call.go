package sdktest

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// Rest stands for the rest of the host's chain in a waterfall call: it
// gets the payload the plugin passed to next (the original when the
// plugin passed none) and returns the chain's result.
type Rest func(ctx stdctx.Context, payload *pluginv1.Payload) (*pluginv1.Result, error)

// Called is what a plugin did with one waterfall call.
type Called struct {
	// Result is what the plugin answered.
	Result *pluginv1.Result
	// Next is the payload the plugin passed to next, or nil when it did
	// not call next (it refused, or answered by itself).
	Next *pluginv1.Payload
}

// Call runs one waterfall call of event, as dsh does for a listener of the
// plugin: it starts the call with payload in scope (the agent id), answers
// the plugin's next by running rest, and returns the plugin's result. An
// error the plugin returned comes back with its code and reason.
func (h *Host) Call(ctx stdctx.Context, event, scope string, payload *pluginv1.Payload, rest Rest) (*Called, error) {
	if h.mux != nil {
		return h.callMux(ctx, event, scope, payload, rest)
	}
	ctx, cancel := stdctx.WithCancel(ctx)
	defer cancel() // ends the stream, whatever the plugin still waits for
	stream, err := h.rpc.Call(ctx)
	if err != nil {
		return nil, err
	}
	start := &pluginv1.CallStart{Event: event, Payload: payload, ScopeTag: scope}
	if err := stream.Send(&pluginv1.HostMessage{Msg: &pluginv1.HostMessage_Start{Start: start}}); err != nil {
		return nil, err
	}
	return h.answer(ctx, event, payload, rest, stream.Recv, func(res *pluginv1.NextResult) error {
		return stream.Send(&pluginv1.HostMessage{Msg: &pluginv1.HostMessage_NextResult{NextResult: res}})
	})
}

// answer plays the host's side of a call once started, on either path:
// it reads the plugin's messages with recv, answers its next by running
// rest and sending the outcome with answerNext, and returns its result.
func (h *Host) answer(ctx stdctx.Context, event string, payload *pluginv1.Payload, rest Rest,
	recv func() (*pluginv1.PluginMessage, error), answerNext func(*pluginv1.NextResult) error) (*Called, error) {
	out := &Called{}
	for {
		in, err := recv()
		if err != nil {
			return nil, errs.Wrap(Protocol, err, fmt.Sprintf("the plugin ended its %s call without a result", event))
		}
		switch m := in.Msg.(type) {
		case *pluginv1.PluginMessage_Result:
			if m.Result.Error != nil {
				return out, sdk.ErrorFromProto(m.Result.Error)
			}
			out.Result = m.Result.Result
			return out, nil
		case *pluginv1.PluginMessage_Next:
			if out.Next != nil {
				return nil, errs.New(Protocol, fmt.Sprintf("the plugin called next of %s twice", event))
			}
			passed := m.Next.Payload
			if passed == nil {
				passed = payload
			}
			out.Next = passed
			answer := &pluginv1.NextResult{}
			res, err := rest(ctx, passed)
			if err != nil {
				answer.Error = sdk.ErrorToProto(err)
			} else {
				answer.Result = res
			}
			if err := answerNext(answer); err != nil {
				return nil, err
			}
		default:
			return nil, errs.New(Protocol, fmt.Sprintf("the plugin sent %T during its %s call", in.Msg, event))
		}
	}
}

// Admitted is what a plugin's admission listener did with one admission.
type Admitted struct {
	// Decision is the plugin's answer: admit, or reject with a reason.
	Decision *sdk.Decision
	// Next is the admission the plugin passed on (changed or not), or nil
	// when it decided without the rest of the chain.
	Next *sdk.Admission
}

// Admission sends a through the plugin's admission listener. rest is the
// rest of the chain (other plugins, then dsh's default); nil admits.
func (h *Host) Admission(ctx stdctx.Context, a *sdk.Admission, rest func(stdctx.Context, *sdk.Admission) (*sdk.Decision, error)) (*Admitted, error) {
	if rest == nil {
		rest = func(stdctx.Context, *sdk.Admission) (*sdk.Decision, error) { return sdk.Admit(), nil }
	}
	called, err := h.Call(ctx, sdk.AdmissionEvent, a.GetAgentId(), &pluginv1.Payload{Event: &pluginv1.Payload_Admission{Admission: a}},
		func(ctx stdctx.Context, p *pluginv1.Payload) (*pluginv1.Result, error) {
			d, err := rest(ctx, p.GetAdmission())
			return &pluginv1.Result{Event: &pluginv1.Result_Decision{Decision: d}}, err
		})
	if err != nil {
		return nil, err
	}
	return &Admitted{Decision: called.Result.GetDecision(), Next: called.Next.GetAdmission()}, nil
}

// Approved is what a plugin's approval policy did with one tool call.
type Approved struct {
	Verdict *sdk.Verdict
	// Next is the approval the plugin deferred with, or nil when it
	// decided itself.
	Next *sdk.Approval
}

// Approval asks the plugin's approval policy about a call. rest stands for
// the policies after it and the tool's default; nil allows.
func (h *Host) Approval(ctx stdctx.Context, a *sdk.Approval, rest func(stdctx.Context, *sdk.Approval) (*sdk.Verdict, error)) (*Approved, error) {
	if rest == nil {
		rest = func(stdctx.Context, *sdk.Approval) (*sdk.Verdict, error) { return sdk.Allow(), nil }
	}
	called, err := h.Call(ctx, sdk.ApprovalEvent, a.GetAgentId(), &pluginv1.Payload{Event: &pluginv1.Payload_Approval{Approval: a}},
		func(ctx stdctx.Context, p *pluginv1.Payload) (*pluginv1.Result, error) {
			v, err := rest(ctx, p.GetApproval())
			return &pluginv1.Result{Event: &pluginv1.Result_Verdict{Verdict: v}}, err
		})
	if err != nil {
		return nil, err
	}
	return &Approved{Verdict: called.Result.GetVerdict(), Next: called.Next.GetApproval()}, nil
}

// Executed is what a plugin's tools/execute listener did with one call.
type Executed struct {
	Result *sdk.ToolResult
	// Next is the execution the plugin let through, or nil when it
	// answered (refused) without running the tool.
	Next *sdk.ToolExecution
}

// ToolExecute sends one tool call through the plugin's tools/execute
// listener. rest stands for the tool itself; nil answers an empty text.
func (h *Host) ToolExecute(ctx stdctx.Context, x *sdk.ToolExecution, rest func(stdctx.Context, *sdk.ToolExecution) (*sdk.ToolResult, error)) (*Executed, error) {
	if rest == nil {
		rest = func(stdctx.Context, *sdk.ToolExecution) (*sdk.ToolResult, error) { return sdk.Text(""), nil }
	}
	called, err := h.Call(ctx, sdk.ToolEvent, x.GetAgentId(), &pluginv1.Payload{Event: &pluginv1.Payload_ToolExecution{ToolExecution: x}},
		func(ctx stdctx.Context, p *pluginv1.Payload) (*pluginv1.Result, error) {
			r, err := rest(ctx, p.GetToolExecution())
			return &pluginv1.Result{Event: &pluginv1.Result_ToolResult{ToolResult: r}}, err
		})
	if err != nil {
		return nil, err
	}
	return &Executed{Result: called.Result.GetToolResult(), Next: called.Next.GetToolExecution()}, nil
}

// Emit hands the plugin one notification, as dsh does, and returns the
// error its listener returned (dsh would log it).
func (h *Host) Emit(ctx stdctx.Context, event, scope string, payload *pluginv1.Payload) error {
	return h.emit(ctx, &pluginv1.EmitRequest{Event: event, Payload: payload, ScopeTag: scope})
}
