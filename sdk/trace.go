package sdk

import (
	stdctx "context"

	"google.golang.org/grpc/metadata"
)

// Traceparent returns the W3C trace context (the traceparent header's
// value, "00-<trace id>-<span id>-<flags>") that dsh sent with the call
// ctx belongs to, or "" when dsh's telemetry is off. A plugin that records
// spans of its own starts them as children of it (with OpenTelemetry's
// propagation.TraceContext over a carrier holding this value and
// Tracestate's), so its work shows inside dsh's trace.
func Traceparent(ctx stdctx.Context) string {
	return incoming(ctx, "traceparent")
}

// Tracestate returns the vendor part of the trace context, or "".
func Tracestate(ctx stdctx.Context) string {
	return incoming(ctx, "tracestate")
}

func incoming(ctx stdctx.Context, key string) string {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ""
	}
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
