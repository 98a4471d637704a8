package host

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
)

// A bridge connects one host event to the listeners of plugin binaries: it
// knows the event's JSON form on the wire and how to register a proxy
// listener that forwards each dispatch to the plugin process.
type bridge struct {
	kind     pluginv1.Kind
	register func(ctx *dshctx.Context, r *remote, prepend bool) error
}

// bridges holds the events plugin binaries can listen to, by name.
var bridges = map[string]bridge{
	agentcontroller.EventAdmission.Name(): waterfallBridge(agentcontroller.EventAdmission, codec[agentcontroller.Admission, agentcontroller.Decision]{
		encode: encodeAdmission, decode: decodeAdmission,
		scope: func(a agentcontroller.Admission) string { return a.Agent.ID() },
		refuse: func(reason, msg string) agentcontroller.Decision {
			return agentcontroller.Reject(reason, msg, false)
		},
	}),
	tools.EventExecute.Name(): waterfallBridge(tools.EventExecute, codec[tools.Execution, tools.Result]{
		encode: encodeExecution, decode: decodeExecution,
		scope:  func(x tools.Execution) string { return x.Call.AgentID },
		refuse: func(_, msg string) tools.Result { return tools.Result{Content: msg, IsError: true} },
	}),
	agentloop.EventRequest.Name(): waterfallBridge(agentloop.EventRequest, codec[agentloop.RequestEvent, llm.Request]{
		encode: func(e agentloop.RequestEvent) any {
			return map[string]any{"agent_id": e.Agent.ID(), "turn": e.Turn, "step": e.Step, "request": requestToWire(e.Request)}
		},
		decode: func(orig agentloop.RequestEvent, data []byte) (agentloop.RequestEvent, error) {
			var w struct {
				Request requestWire `json:"request"`
			}
			err := json.Unmarshal(data, &w)
			orig.Request = w.Request.apply(orig.Request)
			return orig, err
		},
		scope:        func(e agentloop.RequestEvent) string { return e.Agent.ID() },
		encodeResult: func(r llm.Request) any { return requestToWire(r) },
		decodeResult: func(e agentloop.RequestEvent, data []byte) (llm.Request, error) {
			var w requestWire
			err := json.Unmarshal(data, &w)
			return w.apply(e.Request), err
		},
	}),
	agentloop.EventStepResult.Name(): waterfallBridge(agentloop.EventStepResult, codec[agentloop.StepResult, agentloop.StepResult]{
		encode: encodeStepResult, decode: decodeStepResult,
		scope:        func(r agentloop.StepResult) string { return r.Agent.ID() },
		encodeResult: encodeStepResult, decodeResult: decodeStepResult,
	}),
	agentloop.EventContinuation.Name(): waterfallBridge(agentloop.EventContinuation, codec[agentloop.Continuation, bool]{
		encode: func(c agentloop.Continuation) any {
			return map[string]any{"agent_id": c.Agent.ID(), "turn": c.Turn, "step": c.Step, "tool_calls": c.ToolCalls, "steering": c.Steering, "finish": c.Finish}
		},
		decode: func(orig agentloop.Continuation, data []byte) (agentloop.Continuation, error) {
			var w struct {
				ToolCalls int              `json:"tool_calls"`
				Steering  int              `json:"steering"`
				Finish    llm.FinishReason `json:"finish"`
			}
			err := json.Unmarshal(data, &w)
			orig.ToolCalls, orig.Steering, orig.Finish = w.ToolCalls, w.Steering, w.Finish
			return orig, err
		},
		scope: func(c agentloop.Continuation) string { return c.Agent.ID() },
	}),
	agentcontroller.EventInserted.Name(): emitBridge(agentcontroller.EventInserted, func(in agentcontroller.Inserted) (string, any) {
		return in.Agent.ID(), admissionWire{AgentID: in.Agent.ID(), Message: in.Message, Mode: in.Mode, Source: in.Source}
	}),
	agents.EventStatus.Name(): emitBridge(agents.EventStatus, func(c agents.StatusChange) (string, any) {
		return c.Agent.ID(), map[string]any{"agent_id": c.Agent.ID(), "from": c.From, "to": c.To}
	}),
	agentloop.EventStreamChunk.Name(): emitBridge(agentloop.EventStreamChunk, func(c agentloop.StreamChunk) (string, any) {
		return c.Agent.ID(), map[string]any{"agent_id": c.Agent.ID(), "turn": c.Turn, "step": c.Step, "message_id": c.MessageID, "chunk": c.Chunk}
	}),
	session.EventAppended.Name(): emitBridge(session.EventAppended, func(a session.Appended) (string, any) {
		return a.Session.AgentID(), map[string]any{"agent_id": a.Session.AgentID(), "session_id": a.Session.ID(), "event": a.Event}
	}),
}

// requestWire is a model request on the wire: the history travels as a
// message list, and a plugin may change any of it.
type requestWire struct {
	Provider    string         `json:"provider"`
	Model       string         `json:"model"`
	System      string         `json:"system"`
	Messages    []llm.Message  `json:"messages"`
	Tools       []llm.ToolSpec `json:"tools"`
	MaxTokens   int            `json:"max_tokens,omitempty"`
	Temperature *float64       `json:"temperature,omitempty"`
}

func requestToWire(r llm.Request) requestWire {
	return requestWire{Provider: r.Provider, Model: r.Model, System: r.System, Messages: r.History.Messages(),
		Tools: r.Tools, MaxTokens: r.MaxTokens, Temperature: r.Temperature}
}

// apply makes the request a plugin described, keeping the agent it is for.
func (w requestWire) apply(orig llm.Request) llm.Request {
	return llm.Request{AgentID: orig.AgentID, Provider: w.Provider, Model: w.Model, System: w.System,
		History: llm.NewHistory(w.Messages...), Tools: w.Tools, MaxTokens: w.MaxTokens, Temperature: w.Temperature}
}

type stepResultWire struct {
	AgentID string           `json:"agent_id"`
	Turn    int              `json:"turn"`
	Step    int              `json:"step"`
	Message llm.Message      `json:"message"`
	Usage   llm.Usage        `json:"usage"`
	Finish  llm.FinishReason `json:"finish"`
}

func encodeStepResult(r agentloop.StepResult) any {
	return stepResultWire{AgentID: r.Agent.ID(), Turn: r.Turn, Step: r.Step, Message: r.Message, Usage: r.Usage, Finish: r.Finish}
}

func decodeStepResult(orig agentloop.StepResult, data []byte) (agentloop.StepResult, error) {
	var w stepResultWire
	if err := json.Unmarshal(data, &w); err != nil {
		return orig, err
	}
	orig.Message, orig.Usage, orig.Finish = w.Message, w.Usage, w.Finish
	return orig, nil
}

// executionWire is tools/execute on the wire. A plugin may change the
// call's arguments on the way to the tool.
type executionWire struct {
	AgentID string       `json:"agent_id"`
	Call    toolCallWire `json:"call"`
	Known   bool         `json:"known"`
}

type toolCallWire struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func encodeExecution(x tools.Execution) any {
	args := x.Call.Arguments
	if !json.Valid(args) {
		args, _ = json.Marshal(string(args))
	}
	return executionWire{AgentID: x.Call.AgentID, Known: x.Tool != nil, Call: toolCallWire{ID: x.Call.ID, Name: x.Call.Name, Arguments: args}}
}

func decodeExecution(orig tools.Execution, data []byte) (tools.Execution, error) {
	var w executionWire
	if err := json.Unmarshal(data, &w); err != nil {
		return orig, err
	}
	out := orig
	out.Call.Arguments = w.Call.Arguments
	return out, nil
}

// emitBridge builds the bridge of a notification: view gives the agent it
// is about and its JSON form. Emits are one-way: they are queued to the
// plugin and never slow the emitter.
func emitBridge[P any](e *waterfall.Emit[P], view func(P) (string, any)) bridge {
	return bridge{kind: pluginv1.Kind_KIND_EMIT, register: func(ctx *dshctx.Context, r *remote, prepend bool) error {
		var opts []waterfall.Option
		if prepend {
			opts = append(opts, waterfall.Prepend)
		}
		_, err := e.On(ctx, func(_ stdctx.Context, p P) error {
			scope, v := view(p)
			payload, err := json.Marshal(v)
			if err != nil {
				return err
			}
			r.enqueueEmit(&pluginv1.EmitRequest{Event: e.Name(), PayloadJson: payload, ScopeTag: scope})
			return nil
		}, opts...)
		return err
	}}
}

// admissionWire is agent-controller/admission on the wire. The agent
// travels as its id; a plugin can change the message, mode and source.
type admissionWire struct {
	AgentID string                 `json:"agent_id"`
	Message llm.Message            `json:"message"`
	Mode    agentcontroller.Mode   `json:"mode"`
	Source  agentcontroller.Source `json:"source"`
}

func encodeAdmission(a agentcontroller.Admission) any {
	return admissionWire{AgentID: a.Agent.ID(), Message: a.Message, Mode: a.Mode, Source: a.Source}
}

func decodeAdmission(orig agentcontroller.Admission, data []byte) (agentcontroller.Admission, error) {
	var w admissionWire
	if err := json.Unmarshal(data, &w); err != nil {
		return orig, err
	}
	out := orig
	out.Message, out.Mode, out.Source = w.Message, w.Mode, w.Source
	return out, nil
}

// errSkip tells a proxy listener that the plugin is down and its entry says
// to skip it.
var errSkip = errors.New("plugin unavailable; skipped")

// codec says how one waterfall travels on the wire.
type codec[P, R any] struct {
	// encode gives the JSON form of a payload; decode applies a plugin's
	// replacement to the original, which keeps what does not travel.
	encode func(P) any
	decode func(orig P, data []byte) (P, error)
	// scope names the agent a dispatch is about.
	scope func(P) string
	// encodeResult and decodeResult do the same for results; nil means
	// the result is its own JSON.
	encodeResult func(R) any
	decodeResult func(p P, data []byte) (R, error)
	// refuse stands for the plugin while it is down and its entry fails
	// closed, with the reason (ReasonUnavailable or ReasonGivenUp); nil
	// makes the outage an error.
	refuse func(reason, msg string) R
}

func (c codec[P, R]) resultJSON(r R) ([]byte, error) {
	if c.encodeResult != nil {
		return json.Marshal(c.encodeResult(r))
	}
	return json.Marshal(r)
}

func (c codec[P, R]) result(p P, data []byte) (R, error) {
	if c.decodeResult != nil {
		return c.decodeResult(p, data)
	}
	var r R
	err := json.Unmarshal(data, &r)
	return r, err
}

// waterfallBridge builds the bridge of a waterfall from its codec.
func waterfallBridge[P, R any](w *waterfall.Waterfall[P, R], cd codec[P, R]) bridge {
	return bridge{kind: pluginv1.Kind_KIND_WATERFALL, register: func(ctx *dshctx.Context, r *remote, prepend bool) error {
		var opts []waterfall.Option
		if prepend {
			opts = append(opts, waterfall.Prepend)
		}
		_, err := w.On(ctx, func(c stdctx.Context, p P, next waterfall.Next[P, R]) (R, error) {
			var zero R
			payload, err := json.Marshal(cd.encode(p))
			if err != nil {
				return zero, err
			}
			// The chain's own result is kept: when the plugin returns what
			// next gave it, the host uses the original value, which may
			// carry more than its JSON shows.
			var fromNext R
			var fromNextJSON []byte
			out, err := r.call(c, w.Name(), cd.scope(p), payload, func(nc stdctx.Context, replaced []byte) ([]byte, error) {
				np := p
				if replaced != nil {
					if np, err = cd.decode(p, replaced); err != nil {
						return nil, err
					}
				}
				res, err := next.Call(nc, np)
				if err != nil {
					return nil, err
				}
				fromNext = res
				fromNextJSON, err = cd.resultJSON(res)
				return fromNextJSON, err
			})
			if errors.Is(err, errSkip) {
				return next.Call(c, p)
			}
			if e, ok := err.(*errs.Error); ok && cd.refuse != nil && e.Code == PluginCrashed &&
				(e.Reason == ReasonUnavailable || e.Reason == ReasonGivenUp) {
				return cd.refuse(e.Reason, e.Message), nil
			}
			if err != nil {
				return zero, err
			}
			res, err := cd.result(p, out)
			if err != nil {
				return zero, r.protocolError("its result for %s is not valid: %v", w.Name(), err)
			}
			if fromNextJSON != nil {
				if again, err := cd.resultJSON(res); err == nil && bytes.Equal(again, fromNextJSON) {
					return fromNext, nil
				}
			}
			return res, nil
		}, opts...)
		return err
	}}
}
