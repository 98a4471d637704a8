package hooks

import (
	stdctx "context"
	"maps"
	"strings"

	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// runTraced runs one hook inside a dsh.hook span and hands the span's
// trace context to the command as TRACEPARENT (and TRACESTATE), the
// variables OpenTelemetry-aware CLIs read, so what the hook records joins
// the trace. Off, it is run.
func runTraced(ctx stdctx.Context, event string, h *compiled, input []byte, dir string, e env, maxOut int) ran {
	if !telemetry.Enabled() {
		return run(ctx, h.command, input, dir, h.timeout, e, maxOut)
	}
	// The span names where the hook is configured, not its command,
	// which may carry what a trace should not.
	var span trace.Span
	if telemetry.Records(ctx) {
		ctx, span = telemetry.Start(ctx, "dsh.hook "+event, trace.WithAttributes(
			telemetry.AttrStage.String(event), telemetry.AttrHook.String(h.where)))
	} else {
		ctx, span = telemetry.Start(ctx, "")
	}
	if tp := telemetry.Environ(ctx); len(tp) > 0 {
		e.vars = maps.Clone(e.vars)
		for _, kv := range tp {
			k, v, _ := strings.Cut(kv, "=")
			e.vars[k] = v
		}
	}
	r := run(ctx, h.command, input, dir, h.timeout, e, maxOut)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("process.exit.code", r.exit), attribute.Bool("dsh.hook.timed_out", r.timedOut))
		if r.signal != "" {
			span.SetAttributes(attribute.String("dsh.hook.signal", r.signal))
		}
	}
	telemetry.End(span, r.err)
	return r
}
