package telemetry

import (
	stdctx "context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace-context keys as they travel.
const (
	// TraceparentKey is the header (and metadata key) of the W3C trace
	// context.
	TraceparentKey = "traceparent"
	// TraceparentEnv is the variable a hook command finds its trace
	// context in, as Claude Code and the OpenTelemetry CLI conventions
	// name it.
	TraceparentEnv = "TRACEPARENT"
	// TracestateEnv carries the vendor part of the trace context.
	TracestateEnv = "TRACESTATE"
)

// Inject writes ctx's trace context into carrier (gRPC metadata, NATS or
// HTTP headers through their carriers). Off, or with no span, it writes
// nothing.
func Inject(ctx stdctx.Context, carrier propagation.TextMapCarrier) {
	if !on.Load() || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, carrier)
}

// Extract returns ctx carrying the remote trace context found in carrier,
// so spans started from it join the caller's trace. Off, it returns ctx.
func Extract(ctx stdctx.Context, carrier propagation.TextMapCarrier) stdctx.Context {
	if !on.Load() {
		return ctx
	}
	return propagator.Extract(ctx, carrier)
}

// InjectHeader writes ctx's trace context into h.
func InjectHeader(ctx stdctx.Context, h http.Header) {
	Inject(ctx, propagation.HeaderCarrier(h))
}

// ExtractHeader honours an incoming traceparent in h.
func ExtractHeader(ctx stdctx.Context, h http.Header) stdctx.Context {
	if !on.Load() || h.Get(TraceparentKey) == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// MapCarrier reads and writes a map[string]string, for metadata that is a
// plain map (MCP's _meta, a hook's environment).
type MapCarrier = propagation.MapCarrier

// Environ returns TRACEPARENT=… (and TRACESTATE=…) for a child process's
// environment, or nil when there is no span to continue.
func Environ(ctx stdctx.Context) []string {
	if !on.Load() || !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := propagation.MapCarrier{}
	propagator.Inject(ctx, m)
	var out []string
	if v := m[TraceparentKey]; v != "" {
		out = append(out, TraceparentEnv+"="+v)
	}
	if v := m["tracestate"]; v != "" {
		out = append(out, TracestateEnv+"="+v)
	}
	return out
}

// Middleware starts a server span per request, continuing the caller's
// trace when the request carries a traceparent. Off, it calls next
// directly.
func Middleware(name string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !on.Load() {
			next.ServeHTTP(w, r)
			return
		}
		ctx := ExtractHeader(r.Context(), r.Header)
		var span trace.Span
		if Records(ctx) {
			ctx, span = Start(ctx, name+" "+r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(httpAttrs(r)...))
		} else {
			ctx, span = Start(ctx, "")
		}
		if l, ok := ctx.Value(requestLogKey{}).(*RequestLog); ok {
			l.ctx = ctx
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		// The mux writes the route it matched into the request it is
		// handed: this copy, not r.
		r = r.WithContext(ctx)
		next.ServeHTTP(rec, r)
		if span.IsRecording() {
			span.SetAttributes(httpStatus(rec.status))
			if r.Pattern != "" {
				span.SetName(name + " " + r.Pattern)
				span.SetAttributes(attribute.String("http.route", r.Pattern))
			}
			if rec.status >= 500 {
				span.SetStatus(codesError, http.StatusText(rec.status))
			}
		}
		span.End()
	})
}

// RequestLog carries a request's span out of Middleware to the handler
// around it, which writes the request's log line after the span's
// handler returned: put one in the request's context with WithRequestLog
// and log with its Context.
type RequestLog struct{ ctx stdctx.Context }

type requestLogKey struct{}

// WithRequestLog returns r's context with a RequestLog for Middleware to
// fill; off, it returns r's context and a nil RequestLog, whose Logger is
// l itself.
func WithRequestLog(r *http.Request) (stdctx.Context, *RequestLog) {
	if !on.Load() {
		return r.Context(), nil
	}
	l := &RequestLog{}
	return stdctx.WithValue(r.Context(), requestLogKey{}, l), l
}

// Context is the context of the request's span, or Background when there
// was none, for a log call (slog's DebugContext and the like) through a
// SlogHandler.
func (rl *RequestLog) Context() stdctx.Context {
	if rl == nil || rl.ctx == nil {
		return stdctx.Background()
	}
	return rl.ctx
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// Flush keeps Server-Sent Events streaming through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
