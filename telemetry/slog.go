package telemetry

import (
	stdctx "context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// SlogHandler wraps h so that a record logged with a context (slog's
// InfoContext, DebugContext and the like) whose span is valid carries
// trace_id and span_id, as Logger does for hclog: dsh serve's lines then
// sit beside the request's trace. Off, or without a span, the record goes
// to h as it is.
func SlogHandler(h slog.Handler) slog.Handler { return slogHandler{h} }

type slogHandler struct{ slog.Handler }

func (h slogHandler) Handle(ctx stdctx.Context, r slog.Record) error {
	if on.Load() && ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r = r.Clone()
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h slogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return slogHandler{h.Handler.WithAttrs(as)}
}

func (h slogHandler) WithGroup(name string) slog.Handler {
	return slogHandler{h.Handler.WithGroup(name)}
}
