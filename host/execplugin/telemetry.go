package execplugin

import (
	stdctx "context"

	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// startSpan starts the client span of one gRPC call to the plugin and
// puts the W3C trace context in the call's metadata, where the plugin's
// handler finds it (sdk.Traceparent) and can continue the trace.
func (r *remote) startSpan(ctx stdctx.Context, method, what string) (stdctx.Context, trace.Span) {
	var span trace.Span
	if telemetry.Records(ctx) {
		ctx, span = telemetry.Start(ctx, "dsh.plugin "+method+" "+what, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			telemetry.AttrPlugin.String(r.entry.ID), telemetry.AttrRPCMethod.String("dsh.plugin.v1.Plugin/"+method),
			telemetry.AttrEvent.String(what)))
	} else {
		// Not recorded: build no name, but a sampled-out trace still
		// passes its context on, so the plugin does not start one.
		ctx, span = telemetry.Start(ctx, "")
	}
	carrier := telemetry.MapCarrier{}
	telemetry.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return ctx, span
	}
	kv := make([]string, 0, 2*len(carrier))
	for k, v := range carrier {
		kv = append(kv, k, v)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...), span
}
