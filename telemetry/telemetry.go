// Package telemetry is dsh's OpenTelemetry: traces, metrics and the trace
// context that crosses process and host boundaries.
//
// It is off by default and costs next to nothing when off: Enabled is one
// atomic load, Start hands back the caller's context and a shared no-op
// span, the propagation helpers return at once, and the metric helpers do
// nothing. Metrics are not sampled; their instruments are dsh's own
// (instruments.go), an atomic add per measurement, so a sampled-out turn
// stays cheap. Hot paths check Enabled (or the span's IsRecording) before
// they build attributes, so a host without telemetry allocates nothing for it.
//
// Package provider (telemetry/provider) installs one process-wide provider
// from the telemetry: config block and the standard OTEL_* variables; its
// Shutdown flushes it and turns telemetry off again. It is a package of its
// own so that plugins, which import this one through the services, link
// neither the SDK's exporters nor gRPC. One provider per process, not per host, because a
// trace is the process's view: two hosts in one test process still pass
// their context only through the wire (NATS headers, gRPC metadata), so a
// trace that spans them proves the propagation.
//
// Content — prompts, completions, tool arguments and results — is on spans
// only when Config.Content says so (ContentOn).
package telemetry

import (
	stdctx "context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/errs"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every dsh span and metric.
const ScopeName = "github.com/dsh-go/dsh"

var (
	on      atomic.Bool
	content atomic.Bool
	current atomic.Pointer[installed]
	// installMu serialises Setup and Shutdown; the hot paths never take it.
	installMu sync.Mutex

	noopSpan   = trace.SpanFromContext(stdctx.Background())
	noopTracer = noop.NewTracerProvider().Tracer(ScopeName)
	propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
)

// Enabled reports whether telemetry is on: one atomic load.
func Enabled() bool { return on.Load() }

// ContentOn reports whether prompts, completions and tool payloads may go
// on spans (telemetry.content).
func ContentOn() bool { return on.Load() && content.Load() }

// Installation is what a provider hands the package when it is set up:
// the tracer every instrumented path uses. Package provider builds it
// from the OpenTelemetry SDK and its exporters, which stay out of this
// package so that plugins, which import it through the services, do not
// link gRPC; the metrics are this package's own instruments, which the
// provider's readers collect through ReadMetrics.
type Installation struct {
	Tracer trace.Tracer
	// Content puts prompts and completions on spans (Config.Content).
	Content bool
	// Never says sampling is 0: no root span is made at all.
	Never bool
}

type installed struct {
	tracer  trace.Tracer
	metrics *Metrics
	never   bool
}

// Install turns telemetry on with in; the returned uninstall turns it off
// again. A second Install while one is in place is refused.
func Install(in Installation) (uninstall func(), err error) {
	installMu.Lock()
	defer installMu.Unlock()
	if current.Load() != nil {
		return nil, errs.New(errs.InvalidArgument, "telemetry is already set up in this process; shut the provider down first").WithReason(Reason)
	}
	i := &installed{tracer: in.Tracer, metrics: newMetrics(), never: in.Never}
	content.Store(in.Content)
	current.Store(i)
	on.Store(true)
	return func() {
		installMu.Lock()
		defer installMu.Unlock()
		if current.Load() == i {
			on.Store(false)
			content.Store(false)
			current.Store(nil)
		}
	}, nil
}

// Installed reports whether a provider is in place.
func Installed() bool { return current.Load() != nil }

// Tracer is dsh's tracer: a no-op one when telemetry is off.
func Tracer() trace.Tracer {
	if p := current.Load(); p != nil && on.Load() {
		return p.tracer
	}
	return noopTracer
}

// Start starts a span named name as a child of ctx's span. Off, it returns
// ctx itself and a no-op span, allocating nothing.
func Start(ctx stdctx.Context, name string, opts ...trace.SpanStartOption) (stdctx.Context, trace.Span) {
	if !on.Load() {
		return ctx, noopSpan
	}
	p := current.Load()
	if p == nil {
		return ctx, noopSpan
	}
	// A trace sampled out stays sampled out (the sampler is parent
	// based): its children would be non-recording spans that only cost
	// allocations. The parent's context goes on instead, so what is
	// propagated still says "not sampled".
	sc := trace.SpanContextFromContext(ctx)
	if sc.IsValid() && !sc.IsSampled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	// Sampling 0 records no new trace: a root would be a non-recording
	// span that costs an allocation and carries nothing anyone keeps.
	if !sc.IsValid() && p.never {
		return ctx, noopSpan
	}
	return p.tracer.Start(ctx, name, opts...)
}

// End ends span, recording err (when not nil) as its status and an
// exception event with err's code.
func End(span trace.Span, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if err != nil {
		RecordError(span, err)
	}
	span.End()
}

// RecordError marks span as failed with err and its errs code.
func RecordError(span trace.Span, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	if code := errs.CodeOf(err); code != "" {
		span.SetAttributes(attribute.String("error.type", string(code)))
		if r := errs.ReasonOf(err); r != "" {
			span.SetAttributes(attribute.String("dsh.error.reason", r))
		}
	} else {
		span.SetAttributes(attribute.String("error.type", fmt.Sprintf("%T", err)))
	}
	span.RecordError(err)
	span.SetStatus(codesError, err.Error())
}

// Detach returns a context that carries ctx's span (so children join its
// trace) but not its cancellation or values: for work that outlives the
// caller, such as a delivery that runs on after its sender left.
func Detach(base, ctx stdctx.Context) stdctx.Context {
	if !on.Load() {
		return base
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return base
	}
	out := trace.ContextWithSpan(base, trace.SpanFromContext(ctx))
	if mark, ok := ctx.Value(handoffKey{}).(trace.SpanContext); ok {
		out = stdctx.WithValue(out, handoffKey{}, mark)
	}
	return out
}

// Spanless reports whether Start under ctx would make no span at all and
// find none to go on: telemetry is off, or it records no new trace
// (sampling 0) and ctx carries no span context. A path that only starts
// and ends a span and passes its context on can then skip all three.
func Spanless(ctx stdctx.Context) bool {
	if !on.Load() {
		return true
	}
	p := current.Load()
	if p == nil {
		return true
	}
	return p.never && !trace.SpanContextFromContext(ctx).IsValid()
}

// Records reports whether a span Start would make under ctx records: false
// when telemetry is off, when ctx's trace is sampled out, and for a new
// trace under sampling 0. A caller that builds a span's name checks it
// first, so a sampled-out path builds nothing.
func Records(ctx stdctx.Context) bool {
	if !on.Load() {
		return false
	}
	p := current.Load()
	if p == nil {
		return false
	}
	sc := trace.SpanContextFromContext(ctx)
	if sc.IsValid() {
		return sc.IsSampled()
	}
	return !p.never
}
