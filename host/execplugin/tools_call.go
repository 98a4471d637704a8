package execplugin

import (
	stdctx "context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// executeTool is the Execute of every tool the plugin declared: it routes
// a call the pipeline already validated, approved and scheduled to the
// plugin's ExecuteTool, under the entry's call timeout. Whatever goes
// wrong on the plugin's side is an error result naming the plugin and the
// tool, for the model to act on; only the end of ctx (the model's abort)
// is a Go error, as for every tool.
func (r *remote) executeTool(ctx stdctx.Context, call tools.Call) (res tools.Result, err error) {
	if telemetry.Enabled() {
		var span trace.Span
		ctx, span = r.startSpan(ctx, "ExecuteTool", call.Name)
		defer func() { telemetry.End(span, err) }()
	}
	return r.executeToolRPC(ctx, call)
}

func (r *remote) executeToolRPC(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
	rpc := r.current()
	if rpc == nil {
		// Nothing to skip to: a tool has no chain behind it, so
		// on_unavailable: skip answers like fail.
		return r.toolFailure(ctx, call.Name, r.unavailable()), nil
	}
	cctx := ctx
	var own time.Time
	if t := r.callTimeout(); t > 0 {
		own = time.Now().Add(t)
		var cancel stdctx.CancelFunc
		cctx, cancel = stdctx.WithDeadline(ctx, own)
		defer cancel()
	}
	inv := &pluginv1.ToolInvocation{
		AgentId: call.AgentID, Workspace: call.Workspace, Unattended: call.Unattended,
		Call: &pluginv1.ToolCall{Id: call.ID, Name: call.Name, Arguments: string(call.Arguments)},
	}
	var out *pluginv1.ToolOutcome
	err := errMuxBroken
	if m := r.currentMux(); m != nil {
		out, err = m.executeTool(cctx, inv)
	}
	if errors.Is(err, errMuxBroken) {
		out, err = rpc.ExecuteTool(cctx, inv)
	}
	if ctx.Err() != nil {
		// The model's abort (or the caller's deadline): cancelling the
		// RPC already ended the plugin's ctx.
		return tools.Result{}, ctx.Err()
	}
	if notConnected(err) {
		return r.toolFailure(ctx, call.Name, r.unavailable()), nil
	}
	if err != nil {
		if stuck := r.stuckReason(); stuck != nil {
			// In flight when the stuck process was killed: why it died.
			return r.toolFailure(ctx, call.Name, stuck), nil
		}
		if status.Code(err) == codes.Unimplemented {
			return r.toolFailure(ctx, call.Name, r.protocolError("it declares the tool %q but does not implement ExecuteTool", call.Name)), nil
		}
		if status.Code(err) == codes.Unavailable && cctx.Err() == nil {
			// The connection broke: the process died or is dying (its
			// exit may not be seen yet). Said plainly, for the model.
			return r.toolFailure(ctx, call.Name, errs.Wrap(PluginCrashed, err, fmt.Sprintf(
				"plugin %q (%s) crashed or lost its connection during the call; dsh restarts it, so the call may be retried shortly", r.entry.ID, r.entry.Exec))), nil
		}
		return r.toolFailure(ctx, call.Name, r.callError(cctx, own, err)), nil
	}
	if out.GetError() != nil {
		cause := sdk.ErrorFromProto(out.GetError())
		if pastDeadline(cctx) {
			return r.toolFailure(ctx, call.Name, r.timeoutError(cctx, own, cause)), nil
		}
		telemetry.Logger(ctx, r.log).Warn("a plugin's tool failed", "tool", call.Name, "agent", call.AgentID, "error", cause)
		return tools.Result{IsError: true, Content: fmt.Sprintf("The tool %q (plugin %q) failed: %v", call.Name, r.entry.ID, cause)}, nil
	}
	if out.GetResult() == nil {
		return r.toolFailure(ctx, call.Name, r.protocolError("it answered a call of its tool %q with neither a result nor an error", call.Name)), nil
	}
	return toolResultFrom(call.Name, out.GetResult()), nil
}

// toolFailure is the result of a call the plugin could not answer: down,
// crashed, timed out or off the protocol. It is logged, since the operator
// has something to fix that the model cannot.
func (r *remote) toolFailure(ctx stdctx.Context, tool string, err error) tools.Result {
	telemetry.Logger(ctx, r.log).Warn("a call of a plugin's tool failed", "tool", tool, "error", err)
	what := "failed"
	if errs.Has(err, PluginCrashed, ReasonUnavailable) || errs.Has(err, PluginCrashed, ReasonGivenUp) || errs.Has(err, PluginUnhealthy, ReasonUnhealthy) {
		what = "is unavailable"
	}
	return tools.Result{IsError: true, Content: fmt.Sprintf("The tool %q %s and did not run to completion: %v", tool, what, err)}
}

// toolResultFrom is what the model is told of a plugin's result. Text parts
// are joined, one per line, when content is empty. An image cannot reach
// the model until dsh carries attachments; the text says one was dropped,
// so the model does not take the result for empty.
func toolResultFrom(tool string, w *pluginv1.ToolResult) tools.Result {
	content := w.GetContent()
	var texts, dropped []string
	for _, p := range w.GetParts() {
		switch x := p.GetPart().(type) {
		case *pluginv1.ContentPart_Text:
			texts = append(texts, x.Text)
		case *pluginv1.ContentPart_Image:
			dropped = append(dropped, fmt.Sprintf("[the tool %q returned an image (%s, %d bytes) that cannot be shown to the model: dsh does not pass images from tools to models yet]",
				tool, x.Image.GetMediaType(), len(x.Image.GetData())))
		default:
			dropped = append(dropped, fmt.Sprintf("[the tool %q returned a content part this dsh does not know; it was dropped]", tool))
		}
	}
	if content == "" {
		content = strings.Join(texts, "\n")
	}
	if len(dropped) > 0 {
		if content != "" {
			content += "\n"
		}
		content += strings.Join(dropped, "\n")
	}
	return tools.Result{Content: content, IsError: w.GetIsError()}
}
