package mcp

import (
	stdctx "context"

	"github.com/dsh-go/dsh/telemetry"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// startSpan starts the client span of a tools/call and puts its W3C trace
// context in the request's _meta (traceparent, tracestate), where MCP
// servers that trace look for it.
func (s *server) startSpan(ctx stdctx.Context, tool string, params *mcpsdk.CallToolParams) (stdctx.Context, trace.Span) {
	var span trace.Span
	if telemetry.Records(ctx) {
		ctx, span = telemetry.Start(ctx, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			telemetry.AttrMCPMethod.String("tools/call"), telemetry.AttrMCPServer.String(s.cfg.Name), telemetry.AttrToolName.String(tool)))
	} else {
		ctx, span = telemetry.Start(ctx, "")
	}
	carrier := telemetry.MapCarrier{}
	telemetry.Inject(ctx, carrier)
	if len(carrier) > 0 {
		meta := params.GetMeta()
		if meta == nil {
			meta = map[string]any{}
		}
		for k, v := range carrier {
			meta[k] = v
		}
		params.SetMeta(meta)
	}
	return ctx, span
}
