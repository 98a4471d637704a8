package sdk

import (
	stdctx "context"

	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// ToolEvent is the host's tools/execute waterfall: every tool call the
// model makes, before the tool runs.
const ToolEvent = "tools/execute"

type (
	// ToolCall is one call of a tool by the model. Arguments is the
	// model's JSON text (or whatever it produced, when that is not JSON).
	ToolCall = pluginv1.ToolCall
	// ToolExecution is the payload of tools/execute.
	ToolExecution = pluginv1.ToolExecution
	// ToolResult is what the model is told. IsError marks a failure; the
	// model sees Content either way.
	ToolResult = pluginv1.ToolResult
)

// Deny is a result that refuses the call, for a listener that answers
// without calling next.
func Deny(why string) *ToolResult { return &ToolResult{Content: why, IsError: true} }

// ToolNext runs the rest of the chain — in the end, the tool — with a
// (possibly changed) execution. Only the call's arguments can change.
type ToolNext func(ctx stdctx.Context, x *ToolExecution) (*ToolResult, error)

// ToolExecute listens to tools/execute with typed values: let the call
// through by returning next's result, change its arguments by passing a
// changed execution to next, refuse by returning Deny without calling next.
func (p *Plugin) ToolExecute(fn func(ctx stdctx.Context, x *ToolExecution, next ToolNext) (*ToolResult, error), opts ...Option) {
	p.Waterfall(ToolEvent, func(ctx stdctx.Context, call Call, next Next) (*pluginv1.Result, error) {
		x := call.Payload.GetToolExecution()
		if x == nil {
			return nil, badPayload(call, "tool_execution")
		}
		original := x.GetCall().GetArguments()
		r, err := fn(ctx, x, func(ctx stdctx.Context, changed *ToolExecution) (*ToolResult, error) {
			var payload *pluginv1.Payload
			if changed.GetCall().GetArguments() != original {
				payload = &pluginv1.Payload{Event: &pluginv1.Payload_ToolExecution{ToolExecution: changed}}
			}
			out, err := next(ctx, payload)
			if err != nil {
				return nil, err
			}
			return out.GetToolResult(), nil
		})
		if err != nil {
			return nil, err
		}
		return &pluginv1.Result{Event: &pluginv1.Result_ToolResult{ToolResult: r}}, nil
	}, opts...)
}
