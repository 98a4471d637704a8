// Package telemetry is dsh's OpenTelemetry: traces, metrics and the trace
// context that crosses process and host boundaries.
//
// It is off by default and costs next to nothing when off: Enabled is one
// atomic load, Start hands back the caller's context and a shared no-op
// span, the propagation helpers return at once, and the metric helpers do
// nothing. Hot paths check Enabled (or the span's IsRecording) before they
// build attributes, so a host without telemetry allocates nothing for it.
//
// Setup installs one process-wide provider from the telemetry: config block
// and the standard OTEL_* variables; Shutdown flushes it and turns
// telemetry off again. One provider per process, not per host, because a
// trace is the process's view: two hosts in one test process still pass
// their context only through the wire (NATS headers, gRPC metadata), so a
// trace that spans them proves the propagation.
//
// Content — prompts, completions, tool arguments and results — is on spans
// only when Config.Content says so (ContentOn).
package telemetry

import (
	stdctx "context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/errs"
	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every dsh span and metric.
const ScopeName = "github.com/dsh-go/dsh"

var (
	on      atomic.Bool
	content atomic.Bool
	current atomic.Pointer[Provider]
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

// Provider is the installed telemetry: a tracer and a meter provider and,
// when asked for, the Prometheus handler.
type Provider struct {
	cfg     Config
	traces  *sdktrace.TracerProvider
	meters  *sdkmetric.MeterProvider
	tracer  trace.Tracer
	metrics *Metrics
	prom    http.Handler
	// never says sampling is 0: no root span is made at all.
	never bool
}

// Option changes what Setup installs; tests use them to read spans back.
type Option func(*options)

type options struct {
	spanProcessors []sdktrace.SpanProcessor
	readers        []sdkmetric.Reader
}

// WithSpanProcessor adds a span processor beside the OTLP exporter.
func WithSpanProcessor(p sdktrace.SpanProcessor) Option {
	return func(o *options) { o.spanProcessors = append(o.spanProcessors, p) }
}

// WithMetricReader adds a metric reader beside the OTLP and Prometheus ones.
func WithMetricReader(r sdkmetric.Reader) Option {
	return func(o *options) { o.readers = append(o.readers, r) }
}

// Setup installs the provider cfg describes (after FromEnv) and turns
// telemetry on; with cfg off it installs nothing and returns nil, nil.
// A provider already installed is refused: shut it down first.
func Setup(ctx stdctx.Context, cfg Config, opts ...Option) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.On() {
		return nil, nil
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	installMu.Lock()
	defer installMu.Unlock()
	if current.Load() != nil {
		return nil, errs.New(errs.InvalidArgument, "telemetry is already set up in this process; call Shutdown on the provider first").WithReason(Reason)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "dsh"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if host, err := os.Hostname(); err == nil {
		attrs = append(attrs, attribute.String("host.name", host))
	}
	// resource.Environment reads OTEL_RESOURCE_ATTRIBUTES; the config's
	// service name wins over it.
	res, err := resource.Merge(resource.Environment(), resource.NewSchemaless(attrs...))
	if err != nil {
		res = resource.NewSchemaless(attrs...)
	}

	ratio := 1.0
	if cfg.Sampling != nil {
		ratio = *cfg.Sampling
	}
	topts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	exporting := cfg.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if exporting {
		se, me, err := exporters(ctx, cfg)
		if err != nil {
			return nil, err
		}
		topts = append(topts, sdktrace.WithBatcher(se, sdktrace.WithBatchTimeout(time.Second)))
		interval := cfg.MetricsInterval
		if interval == 0 {
			interval = time.Minute
		}
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(interval))))
	}
	for _, sp := range o.spanProcessors {
		topts = append(topts, sdktrace.WithSpanProcessor(sp))
	}
	for _, r := range o.readers {
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	p := &Provider{cfg: cfg, never: ratio == 0}
	if cfg.Prometheus.Enabled {
		reg := promclient.NewRegistry()
		pe, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "telemetry: starting the Prometheus exporter failed")
		}
		mopts = append(mopts, sdkmetric.WithReader(pe))
		p.prom = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	p.traces = sdktrace.NewTracerProvider(topts...)
	p.meters = sdkmetric.NewMeterProvider(mopts...)
	p.tracer = p.traces.Tracer(ScopeName)
	if p.metrics, err = newMetrics(p.meters.Meter(ScopeName)); err != nil {
		_ = p.traces.Shutdown(ctx)
		_ = p.meters.Shutdown(ctx)
		return nil, errs.Wrap(errs.Internal, err, "telemetry: creating the metric instruments failed")
	}
	content.Store(cfg.Content)
	current.Store(p)
	on.Store(true)
	return p, nil
}

func exporters(ctx stdctx.Context, cfg Config) (sdktrace.SpanExporter, sdkmetric.Exporter, error) {
	headers, err := parseHeaders(cfg.HeadersEnv)
	if err != nil {
		return nil, nil, err
	}
	var se sdktrace.SpanExporter
	var me sdkmetric.Exporter
	if cfg.protocol() == ProtocolHTTP {
		// The endpoint is the receiver's base URL, as
		// OTEL_EXPORTER_OTLP_ENDPOINT is: each signal has its path under it.
		base := strings.TrimRight(cfg.Endpoint, "/")
		to := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(base + "/v1/traces")}
		mo := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(base + "/v1/metrics")}
		if cfg.Endpoint == "" {
			to, mo = nil, nil
		}
		if cfg.Insecure {
			to = append(to, otlptracehttp.WithInsecure())
			mo = append(mo, otlpmetrichttp.WithInsecure())
		}
		if headers != nil {
			to = append(to, otlptracehttp.WithHeaders(headers))
			mo = append(mo, otlpmetrichttp.WithHeaders(headers))
		}
		if se, err = otlptracehttp.New(ctx, to...); err == nil {
			me, err = otlpmetrichttp.New(ctx, mo...)
		}
	} else {
		var to []otlptracegrpc.Option
		var mo []otlpmetricgrpc.Option
		switch {
		case strings.HasPrefix(cfg.Endpoint, "http://") || strings.HasPrefix(cfg.Endpoint, "https://"):
			to = append(to, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
			mo = append(mo, otlpmetricgrpc.WithEndpointURL(cfg.Endpoint))
		case cfg.Endpoint != "":
			to = append(to, otlptracegrpc.WithEndpoint(cfg.Endpoint))
			mo = append(mo, otlpmetricgrpc.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure {
			to = append(to, otlptracegrpc.WithInsecure())
			mo = append(mo, otlpmetricgrpc.WithInsecure())
		}
		if headers != nil {
			to = append(to, otlptracegrpc.WithHeaders(headers))
			mo = append(mo, otlpmetricgrpc.WithHeaders(headers))
		}
		if se, err = otlptracegrpc.New(ctx, to...); err == nil {
			me, err = otlpmetricgrpc.New(ctx, mo...)
		}
	}
	if err != nil {
		if se != nil {
			_ = se.Shutdown(ctx)
		}
		return nil, nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("telemetry: the OTLP exporter for %q refused its settings; check telemetry.endpoint and telemetry.protocol", cfg.Endpoint)).WithReason(Reason)
	}
	return se, me, nil
}

// parseHeaders reads k=v,k2=v2 from the variable name names. The values
// are secrets: no error repeats them.
func parseHeaders(name string) (map[string]string, error) {
	if name == "" {
		return nil, nil
	}
	v, ok := os.LookupEnv(name)
	if !ok {
		return nil, invalid(fmt.Sprintf("telemetry.headers_env names %s, which is not set; export it as key=value,key2=value2", name))
	}
	out := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, invalid(fmt.Sprintf("%s holds an entry without key=value; write key=value,key2=value2", name))
		}
		out[k] = val
	}
	return out, nil
}

// Shutdown flushes what is buffered, stops the exporters and turns
// telemetry off.
func (p *Provider) Shutdown(ctx stdctx.Context) error {
	if p == nil {
		return nil
	}
	installMu.Lock()
	defer installMu.Unlock()
	if current.Load() == p {
		on.Store(false)
		content.Store(false)
		current.Store(nil)
	}
	return errors.Join(p.traces.Shutdown(ctx), p.meters.Shutdown(ctx))
}

// ForceFlush exports every ended span and the metrics now.
func (p *Provider) ForceFlush(ctx stdctx.Context) error {
	if p == nil {
		return nil
	}
	return errors.Join(p.traces.ForceFlush(ctx), p.meters.ForceFlush(ctx))
}

// PrometheusHandler serves the metrics in the Prometheus text format, or
// is nil when telemetry.prometheus is off.
func (p *Provider) PrometheusHandler() http.Handler {
	if p == nil {
		return nil
	}
	return p.prom
}

// Config is the config the provider was set up with.
func (p *Provider) Config() Config { return p.cfg }

// Current is the installed provider, or nil.
func Current() *Provider { return current.Load() }

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

// SampledOut reports whether ctx belongs to a trace that is not recorded,
// so a caller can skip building a span's name and attributes.
func SampledOut(ctx stdctx.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && !sc.IsSampled()
}
