package execplugin

import (
	stdctx "context"
	"errors"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/wire"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
	"google.golang.org/protobuf/proto"
)

// A bridge connects one host event to the listeners of plugin binaries: it
// knows the event's form on the wire and how to register a proxy
// listener that forwards each dispatch to the plugin process.
type bridge struct {
	kind     pluginv1.Kind
	register func(ctx *dshctx.Context, r *remote, prepend bool) error
}

// bridges holds the events plugin binaries can listen to, by name. The
// conversions live in internal/wire, next to nothing else.
var bridges = map[string]bridge{
	agentcontroller.EventAdmission.Name(): waterfallBridge(agentcontroller.EventAdmission, codec[agentcontroller.Admission, agentcontroller.Decision]{
		encode: wire.Admission, decode: wire.ApplyAdmission,
		encodeResult: wire.Decision, decodeResult: wire.DecisionFrom,
		scope: func(a agentcontroller.Admission) string { return a.Agent.ID() },
		refuse: func(reason, msg string) agentcontroller.Decision {
			return agentcontroller.Reject(reason, msg, false)
		},
	}),
	tools.EventExecute.Name(): waterfallBridge(tools.EventExecute, codec[tools.Execution, tools.Result]{
		encode: wire.Execution, decode: wire.ApplyExecution,
		encodeResult: wire.ToolResult, decodeResult: wire.ToolResultFrom,
		scope:  func(x tools.Execution) string { return x.Call.AgentID },
		refuse: func(_, msg string) tools.Result { return tools.Result{Content: msg, IsError: true} },
	}),
	agentloop.EventRequest.Name(): waterfallBridge(agentloop.EventRequest, codec[agentloop.RequestEvent, llm.Request]{
		encode: wire.Request, decode: wire.ApplyRequest,
		encodeResult: wire.RequestResult, decodeResult: wire.RequestResultFrom,
		scope: func(e agentloop.RequestEvent) string { return e.Agent.ID() },
	}),
	agentloop.EventStepResult.Name(): waterfallBridge(agentloop.EventStepResult, codec[agentloop.StepResult, agentloop.StepResult]{
		encode: wire.StepResult, decode: wire.ApplyStepResult,
		encodeResult: wire.StepResultResult, decodeResult: wire.StepResultFrom,
		scope: func(r agentloop.StepResult) string { return r.Agent.ID() },
	}),
	agentloop.EventContinuation.Name(): waterfallBridge(agentloop.EventContinuation, codec[agentloop.Continuation, bool]{
		encode: wire.Continuation, decode: wire.ApplyContinuation,
		encodeResult: wire.Continue, decodeResult: wire.ContinueFrom,
		scope: func(c agentloop.Continuation) string { return c.Agent.ID() },
	}),
	tools.EventApprove.Name():            waterfallBridge(tools.EventApprove, approvalCodec),
	agentcontroller.EventInserted.Name(): emitBridge(agentcontroller.EventInserted, wire.Inserted),
	agents.EventStatus.Name():            emitBridge(agents.EventStatus, wire.Status),
	agentloop.EventStreamChunk.Name():    emitBridge(agentloop.EventStreamChunk, wire.StreamChunk),
	session.EventAppended.Name():         emitBridge(session.EventAppended, wire.SessionEvent),
	sessions.EventOutcome.Name():         emitBridge(sessions.EventOutcome, wire.SessionOutcome),
	approval.EventRequested.Name():       emitBridge(approval.EventRequested, wire.ApprovalRequested),
	approval.EventAnswered.Name():        emitBridge(approval.EventAnswered, wire.ApprovalAnswered),
}

// emitBridge builds the bridge of a notification: view gives the agent it
// is about and its payload. Emits are one-way: they are queued to the
// plugin and never slow the emitter.
func emitBridge[P any](e *waterfall.Emit[P], view func(P) (string, *pluginv1.Payload)) bridge {
	return bridge{kind: pluginv1.Kind_KIND_EMIT, register: func(ctx *dshctx.Context, r *remote, prepend bool) error {
		var opts []waterfall.Option
		if prepend {
			opts = append(opts, waterfall.Prepend)
		}
		_, err := e.On(ctx, func(_ stdctx.Context, p P) error {
			scope, payload := view(p)
			r.enqueueEmit(&pluginv1.EmitRequest{Event: e.Name(), Payload: payload, ScopeTag: scope})
			return nil
		}, opts...)
		return err
	}}
}

// errSkip tells a proxy listener that the plugin is down and its entry says
// to skip it.
var errSkip = errors.New("plugin unavailable; skipped")

// codec says how one waterfall travels on the wire.
type codec[P, R any] struct {
	// encode gives the wire form of a payload; decode applies a plugin's
	// replacement to the original, which keeps what does not travel.
	encode func(P) *pluginv1.Payload
	decode func(orig P, w *pluginv1.Payload) (P, error)
	// scope names the agent a dispatch is about.
	scope func(P) string
	// encodeResult and decodeResult do the same for results.
	encodeResult func(R) *pluginv1.Result
	decodeResult func(p P, w *pluginv1.Result) (R, error)
	// refuse stands for the plugin while it is down and its entry fails
	// closed, with the reason (ReasonUnavailable or ReasonGivenUp); nil
	// makes the outage an error.
	refuse func(reason, msg string) R
	// failClosed, when set, stands for the plugin whenever it does not
	// answer usably — down, crashed, timed out, an error of its own, a
	// result that does not decode — so such a plugin never lets anything
	// through. plugin names it ("exec:<id>"). ok false leaves err as it is.
	failClosed func(plugin string, err error) (res R, ok bool)
	// attribute marks a result the plugin made itself as its own.
	attribute func(res R, plugin string) R
	// passedOn carries what a plugin changed in the payload it passed to
	// next into next's result, where the event needs it there to act.
	passedOn func(orig, passed P, res R) R
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
			// The chain's own result is kept: when the plugin returns what
			// next gave it, the host uses the original value, which may
			// carry more than its wire form shows.
			var fromNext R
			var fromNextWire *pluginv1.Result
			out, err := r.call(c, w.Name(), cd.scope(p), cd.encode(p), func(nc stdctx.Context, replaced *pluginv1.Payload) (*pluginv1.Result, error) {
				np := p
				if replaced != nil {
					var err error
					if np, err = cd.decode(p, replaced); err != nil {
						return nil, r.protocolError("its payload for next of %s is not valid: %v", w.Name(), err)
					}
				}
				res, err := next.Call(nc, np)
				if err != nil {
					return nil, err
				}
				if cd.passedOn != nil && replaced != nil {
					res = cd.passedOn(p, np, res)
				}
				fromNext, fromNextWire = res, cd.encodeResult(res)
				return fromNextWire, nil
			})
			if errors.Is(err, errSkip) {
				return next.Call(c, p)
			}
			label := "exec:" + r.entry.ID
			if err != nil && cd.failClosed != nil && c.Err() == nil {
				if res, ok := cd.failClosed(label, err); ok {
					return res, nil
				}
			}
			if e, ok := err.(*errs.Error); ok && cd.refuse != nil && e.Code == PluginCrashed &&
				(e.Reason == ReasonUnavailable || e.Reason == ReasonGivenUp) {
				return cd.refuse(e.Reason, e.Message), nil
			}
			if err != nil {
				return zero, err
			}
			if fromNextWire != nil && proto.Equal(out, fromNextWire) {
				return fromNext, nil
			}
			res, err := cd.decodeResult(p, out)
			if err != nil {
				err = r.protocolError("its result for %s is not valid: %v", w.Name(), err)
				if cd.failClosed != nil {
					if res, ok := cd.failClosed(label, err); ok {
						return res, nil
					}
				}
				return zero, err
			}
			if cd.attribute != nil {
				res = cd.attribute(res, label)
			}
			return res, nil
		}, opts...)
		return err
	}}
}
