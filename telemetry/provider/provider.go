// Package provider sets telemetry up: the OpenTelemetry SDK's tracer and
// meter providers, the OTLP exporters (gRPC or HTTP) and the Prometheus
// reader, installed into package telemetry. It is apart from telemetry so
// that only the host and tests link the SDK's exporters and gRPC; plugins
// reach telemetry through the services and link neither.
package provider

import (
	stdctx "context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/telemetry"
	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Provider is the installed telemetry: a tracer and a meter provider and,
// when asked for, the Prometheus handler.
type Provider struct {
	cfg       telemetry.Config
	traces    *sdktrace.TracerProvider
	meters    *sdkmetric.MeterProvider
	prom      http.Handler
	uninstall func()
}

// Option changes what Setup installs; tests use them to read spans back.
type Option func(*options)

type options struct {
	spanProcessors []sdktrace.SpanProcessor
	readers        []func(sdkmetric.Producer) sdkmetric.Reader
}

// WithSpanProcessor adds a span processor beside the OTLP exporter.
func WithSpanProcessor(p sdktrace.SpanProcessor) Option {
	return func(o *options) { o.spanProcessors = append(o.spanProcessors, p) }
}

// WithMetricReader adds a metric reader beside the OTLP and Prometheus
// ones. Setup makes it with the producer of dsh's instruments, which it
// must be given (sdkmetric.WithProducer): a reader without it sees none.
func WithMetricReader(r func(sdkmetric.Producer) sdkmetric.Reader) Option {
	return func(o *options) { o.readers = append(o.readers, r) }
}

// Setup installs the provider cfg describes (after FromEnv) and turns
// telemetry on; with cfg off it installs nothing and returns nil, nil.
// A provider already installed is refused: shut it down first.
func Setup(ctx stdctx.Context, cfg telemetry.Config, opts ...Option) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.On() {
		return nil, nil
	}
	if telemetry.Installed() {
		return nil, errs.New(errs.InvalidArgument, "telemetry is already set up in this process; call Shutdown on the provider first").WithReason(telemetry.Reason)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
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
	prod := &producer{}
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
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(interval), sdkmetric.WithProducer(prod))))
	}
	for _, sp := range o.spanProcessors {
		topts = append(topts, sdktrace.WithSpanProcessor(sp))
	}
	for _, r := range o.readers {
		mopts = append(mopts, sdkmetric.WithReader(r(prod)))
	}
	p := &Provider{cfg: cfg}
	if cfg.Prometheus.Enabled {
		reg := promclient.NewRegistry()
		pe, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithProducer(prod))
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "telemetry: starting the Prometheus exporter failed")
		}
		mopts = append(mopts, sdkmetric.WithReader(pe))
		p.prom = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	p.traces = sdktrace.NewTracerProvider(topts...)
	p.meters = sdkmetric.NewMeterProvider(mopts...)
	p.uninstall, err = telemetry.Install(telemetry.Installation{
		Tracer: p.traces.Tracer(telemetry.ScopeName), Content: cfg.Content, Never: ratio == 0,
	})
	if err != nil {
		_ = p.traces.Shutdown(ctx)
		_ = p.meters.Shutdown(ctx)
		return nil, err
	}
	// The producer keeps this installation's instruments, not whatever M
	// returns later: Shutdown turns telemetry off before the readers'
	// last collection, which must still see them.
	prod.m.Store(telemetry.M())
	return p, nil
}

func exporters(ctx stdctx.Context, cfg telemetry.Config) (sdktrace.SpanExporter, sdkmetric.Exporter, error) {
	headers, err := parseHeaders(cfg.HeadersEnv)
	if err != nil {
		return nil, nil, err
	}
	var se sdktrace.SpanExporter
	var me sdkmetric.Exporter
	if cfg.Protocol == telemetry.ProtocolHTTP {
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
		return nil, nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("telemetry: the OTLP exporter for %q refused its settings; check telemetry.endpoint and telemetry.protocol", cfg.Endpoint)).WithReason(telemetry.Reason)
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

func invalid(msg string) error {
	return errs.New(errs.InvalidArgument, msg).WithReason(telemetry.Reason)
}

// Shutdown flushes what is buffered, stops the exporters and turns
// telemetry off.
func (p *Provider) Shutdown(ctx stdctx.Context) error {
	if p == nil {
		return nil
	}
	p.uninstall()
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
func (p *Provider) Config() telemetry.Config { return p.cfg }
