package sdk

import (
	"bytes"
	stdctx "context"
	"encoding/json"
)

// ToolEvent is the host's tools/execute waterfall: every tool call the
// model makes, before the tool runs.
const ToolEvent = "tools/execute"

// ToolCall is one call of a tool by the model. Arguments is the model's
// JSON (a JSON string when the model produced something that is not JSON).
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolExecution is the payload of tools/execute.
type ToolExecution struct {
	AgentID string   `json:"agent_id"`
	Call    ToolCall `json:"call"`
	// Known is false when no tool of that name is registered.
	Known bool `json:"known"`
}

// ToolResult is what the model is told. IsError marks a failure; the model
// sees Content either way.
type ToolResult struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// Deny is a result that refuses the call, for a listener that answers
// without calling next.
func Deny(why string) ToolResult { return ToolResult{Content: why, IsError: true} }

// ToolNext runs the rest of the chain — in the end, the tool — with a
// (possibly changed) execution. Only the call's arguments can change.
type ToolNext func(ctx stdctx.Context, x ToolExecution) (ToolResult, error)

// ToolExecute listens to tools/execute with typed values: let the call
// through by returning next's result, change its arguments by passing a
// changed execution to next, refuse by returning Deny without calling next.
func (p *Plugin) ToolExecute(fn func(ctx stdctx.Context, x ToolExecution, next ToolNext) (ToolResult, error), opts ...Option) {
	p.Waterfall(ToolEvent, func(ctx stdctx.Context, call Call, next Next) (json.RawMessage, error) {
		var x ToolExecution
		if err := json.Unmarshal(call.Payload, &x); err != nil {
			return nil, err
		}
		original := x.Call.Arguments
		r, err := fn(ctx, x, func(ctx stdctx.Context, changed ToolExecution) (ToolResult, error) {
			var payload json.RawMessage
			if !bytes.Equal(changed.Call.Arguments, original) {
				var err error
				if payload, err = json.Marshal(changed); err != nil {
					return ToolResult{}, err
				}
			}
			out, err := next(ctx, payload)
			if err != nil {
				return ToolResult{}, err
			}
			var r ToolResult
			return r, json.Unmarshal(out, &r)
		})
		if err != nil {
			return nil, err
		}
		return json.Marshal(r)
	}, opts...)
}
