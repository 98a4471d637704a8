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
	agentcontroller.EventAdmission.Name(): waterfallBridge(agentcontroller.EventAdmission, encodeAdmission, decodeAdmission,
		func(a agentcontroller.Admission) string { return a.Agent.ID() },
		func(msg string) agentcontroller.Decision {
			return agentcontroller.Reject(ReasonUnavailable, msg, false)
		}),
	tools.EventExecute.Name(): waterfallBridge(tools.EventExecute, encodeExecution, decodeExecution,
		func(x tools.Execution) string { return x.Call.AgentID },
		func(msg string) tools.Result { return tools.Result{Content: msg, IsError: true} }),
	agentcontroller.EventInserted.Name(): emitBridge(agentcontroller.EventInserted, func(in agentcontroller.Inserted) (string, any) {
		return in.Agent.ID(), admissionWire{AgentID: in.Agent.ID(), Message: in.Message, Mode: in.Mode, Source: in.Source}
	}),
	agents.EventStatus.Name(): emitBridge(agents.EventStatus, func(c agents.StatusChange) (string, any) {
		return c.Agent.ID(), map[string]any{"agent_id": c.Agent.ID(), "from": c.From, "to": c.To}
	}),
	session.EventAppended.Name(): emitBridge(session.EventAppended, func(a session.Appended) (string, any) {
		return a.Session.AgentID(), map[string]any{"agent_id": a.Session.AgentID(), "session_id": a.Session.ID(), "event": a.Event}
	}),
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

// waterfallBridge builds the bridge of a waterfall whose payload P travels
// as encode(P), whose result R travels as its own JSON, and whose dispatch
// is about the agent scope(P) names. refuse is the result that stands for
// the plugin while it is down and its entry fails closed.
func waterfallBridge[P, R any](w *waterfall.Waterfall[P, R], encode func(P) any, decode func(orig P, data []byte) (P, error),
	scope func(P) string, refuse func(msg string) R) bridge {
	return bridge{kind: pluginv1.Kind_KIND_WATERFALL, register: func(ctx *dshctx.Context, r *remote, prepend bool) error {
		var opts []waterfall.Option
		if prepend {
			opts = append(opts, waterfall.Prepend)
		}
		_, err := w.On(ctx, func(c stdctx.Context, p P, next waterfall.Next[P, R]) (R, error) {
			var zero R
			payload, err := json.Marshal(encode(p))
			if err != nil {
				return zero, err
			}
			// The chain's own result is kept: when the plugin returns what
			// next gave it, the host uses the original value, which may
			// carry more than its JSON shows.
			var fromNext R
			var fromNextJSON []byte
			out, err := r.call(c, w.Name(), scope(p), payload, func(nc stdctx.Context, replaced []byte) ([]byte, error) {
				np := p
				if replaced != nil {
					if np, err = decode(p, replaced); err != nil {
						return nil, err
					}
				}
				res, err := next.Call(nc, np)
				if err != nil {
					return nil, err
				}
				fromNext = res
				fromNextJSON, err = json.Marshal(res)
				return fromNextJSON, err
			})
			if errors.Is(err, errSkip) {
				return next.Call(c, p)
			}
			if errs.Has(err, PluginCrashed, ReasonUnavailable) {
				return refuse(err.(*errs.Error).Message), nil
			}
			if err != nil {
				return zero, err
			}
			var res R
			if err := json.Unmarshal(out, &res); err != nil {
				return zero, r.protocolError("its result for %s is not valid JSON: %v", w.Name(), err)
			}
			if fromNextJSON != nil {
				if again, err := json.Marshal(res); err == nil && bytes.Equal(again, fromNextJSON) {
					return fromNext, nil
				}
			}
			return res, nil
		}, opts...)
		return err
	}}
}
