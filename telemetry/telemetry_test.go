package telemetry_test

import (
	stdctx "context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/otlptest"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func on() *bool { b := true; return &b }

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// Off, the helpers hand back what they were given and allocate nothing:
// the promise that a host without telemetry pays nothing for it.
func TestOffCostsNothing(t *testing.T) {
	ctx := stdctx.Background()
	carrier := telemetry.MapCarrier{}
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := telemetry.Start(ctx, "x")
		if c != ctx || span.IsRecording() {
			t.Fatal("off, Start returned a new context or a recording span")
		}
		span.End()
		telemetry.End(span, nil)
		telemetry.Inject(ctx, carrier)
		_ = telemetry.Extract(ctx, nil)
		_ = telemetry.Environ(ctx)
		_ = telemetry.LogArgs(ctx)
		telemetry.Handoff("m", ctx)
		_ = telemetry.M()
	})
	if allocs != 0 {
		t.Fatalf("off, the helpers allocate %v times per run; want 0", allocs)
	}
	if telemetry.Enabled() {
		t.Fatal("telemetry is on without Setup")
	}
}

func TestConfigFromEnvAndValidate(t *testing.T) {
	c, err := telemetry.Config{}.FromEnv(env())
	if err != nil || c.On() {
		t.Fatalf("no block, no variables: on %v, err %v; want off", c.On(), err)
	}
	c, err = telemetry.Config{}.FromEnv(env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf",
		"OTEL_SERVICE_NAME", "dsh-prod", "OTEL_TRACES_SAMPLER_ARG", "0.25", "OTEL_METRIC_EXPORT_INTERVAL", "5000"))
	if err != nil || !c.On() || c.Endpoint != "http://collector:4318" || c.Protocol != telemetry.ProtocolHTTP || c.ServiceName != "dsh-prod" ||
		*c.Sampling != 0.25 || c.MetricsInterval != 5*time.Second {
		t.Fatalf("from OTEL_*: %+v, %v", c, err)
	}
	off := false
	c, _ = telemetry.Config{Enabled: &off}.FromEnv(env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"))
	if c.On() {
		t.Fatal("enabled: false is overridden by the environment")
	}
	c, _ = telemetry.Config{}.FromEnv(env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", "OTEL_SDK_DISABLED", "true"))
	if c.On() {
		t.Fatal("OTEL_SDK_DISABLED=true leaves telemetry on")
	}
	c, _ = telemetry.Config{Endpoint: "mine:4317"}.FromEnv(env("OTEL_EXPORTER_OTLP_ENDPOINT", "theirs:4317", "OTEL_TRACES_EXPORTER", "otlp"))
	if c.Endpoint != "mine:4317" || !c.On() {
		t.Fatalf("the block does not win over the environment: %+v", c)
	}

	bad := 1.5
	for _, tc := range []struct {
		cfg  telemetry.Config
		want string
	}{
		{telemetry.Config{Protocol: "udp"}, `telemetry.protocol is "udp"`},
		{telemetry.Config{Sampling: &bad}, "telemetry.sampling is 1.5"},
		{telemetry.Config{Protocol: telemetry.ProtocolHTTP, Endpoint: "collector:4318"}, "is no http(s) URL"},
		{telemetry.Config{Endpoint: "collector/4317"}, "neither host:port nor a URL"},
		{telemetry.Config{HeadersEnv: "api-key=secret"}, "name a variable"},
		{telemetry.Config{MetricsInterval: -time.Second}, "telemetry.metrics_interval"},
	} {
		err := tc.cfg.Validate()
		if !errs.Has(err, errs.InvalidArgument, telemetry.Reason) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := (telemetry.Config{}).FromEnv(env("OTEL_TRACES_SAMPLER_ARG", "half")); !errs.Has(err, errs.InvalidArgument, telemetry.Reason) {
		t.Fatalf("a bad OTEL_TRACES_SAMPLER_ARG: %v", err)
	}
}

// Spans and metrics reach a real OpenTelemetry Collector over both
// protocols, the spans carry their parent, the trace context goes through
// headers, a map and a child's environment and comes back as the same
// trace, and a counter arrives with the count added.
func TestExportAndPropagation(t *testing.T) {
	for _, proto := range []string{telemetry.ProtocolGRPC, telemetry.ProtocolHTTP} {
		t.Run(proto, func(t *testing.T) {
			r := otlptest.Start(t)
			cfg := telemetry.Config{Enabled: on(), Protocol: proto, Endpoint: r.GRPCEndpoint(), Insecure: true, ServiceName: "dsh-test"}
			if proto == telemetry.ProtocolHTTP {
				cfg.Endpoint = r.HTTPEndpoint()
			}
			p, err := provider.Setup(stdctx.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(stdctx.Background())
			if _, err := provider.Setup(stdctx.Background(), cfg); !errs.Has(err, errs.InvalidArgument, telemetry.Reason) {
				t.Fatalf("a second Setup: %v", err)
			}
			ctx, root := telemetry.Start(stdctx.Background(), "root")
			h := http.Header{}
			telemetry.InjectHeader(ctx, h)
			if !strings.HasPrefix(h.Get("traceparent"), "00-"+root.SpanContext().TraceID().String()) {
				t.Fatalf("traceparent %q", h.Get("traceparent"))
			}
			// Another process's side: a fresh context that only has the header.
			remote := telemetry.ExtractHeader(stdctx.Background(), h)
			_, child := telemetry.Start(remote, "child")
			child.End()
			envs := telemetry.Environ(ctx)
			if len(envs) != 1 || envs[0] != "TRACEPARENT="+h.Get("traceparent") {
				t.Fatalf("environment %q", envs)
			}
			if args := telemetry.LogArgs(ctx); len(args) != 4 || args[1] != root.SpanContext().TraceID().String() {
				t.Fatalf("log args %v", args)
			}
			telemetry.End(root, errs.New(errs.Internal, "boom"))
			telemetry.M().Inputs.Add(2, "api", "admitted")
			telemetry.M().Inputs.Add(1, "api", "refused")
			if err := p.ForceFlush(stdctx.Background()); err != nil {
				t.Fatal(err)
			}
			tr := otlptest.Await(t, r, 10*time.Second, "root", "root", "child")
			rs, cs := tr.Find("root"), tr.Find("child")
			if cs.ParentID != rs.SpanID || rs.Service != "dsh-test" || rs.Attributes["error.type"] != "INTERNAL" || rs.Error == "" {
				t.Fatalf("root %+v child %+v", rs, cs)
			}
			otlptest.AwaitSum(t, r, 10*time.Second, 2, "dsh.inputs", "entry_point", "api", "outcome", "admitted")
			otlptest.AwaitSum(t, r, 10*time.Second, 3, "dsh.inputs", "entry_point", "api")
		})
	}
}

// With sampling 0 no new trace is made at all, and a caller's
// sampled-out trace goes on unrecorded, saying so to whoever is next.
func TestSampledOut(t *testing.T) {
	zero := 0.0
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: on(), Sampling: &zero})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(stdctx.Background())
	bg := stdctx.Background()
	ctx, span := telemetry.Start(bg, "x")
	span.End()
	if ctx != bg || span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatalf("sampling 0 made a root: recording %v, sc %+v", span.IsRecording(), span.SpanContext())
	}
	if !telemetry.Spanless(bg) {
		t.Fatal("under sampling 0 with no caller's trace, Spanless says a span would be made")
	}
	in := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	ctx = telemetry.ExtractHeader(bg, http.Header{"Traceparent": {in}})
	if telemetry.Records(ctx) {
		t.Fatal("a span under an unsampled traceparent would record")
	}
	// The caller's context goes on, unsampled as it is.
	if telemetry.Spanless(ctx) {
		t.Fatal("Spanless under a caller's unsampled traceparent")
	}
	ctx, child := telemetry.Start(ctx, "y")
	child.End()
	out := http.Header{}
	telemetry.InjectHeader(ctx, out)
	if child.IsRecording() || out.Get("traceparent") != in {
		t.Fatalf("a sampled-out caller: recording %v, passed on %q; want %q", child.IsRecording(), out.Get("traceparent"), in)
	}
}

// The handoff carries a span to the goroutine that takes a message, once,
// and a marked span wins over the spans started below it.
func TestHandoff(t *testing.T) {
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: on()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(stdctx.Background())
	ctx, input := telemetry.Start(stdctx.Background(), "input")
	defer input.End()
	ctx = telemetry.MarkHandoff(ctx)
	inner, admission := telemetry.Start(ctx, "admission")
	defer admission.End()
	telemetry.Handoff("m1", telemetry.Detach(stdctx.Background(), inner))
	sc, ok := telemetry.TakeHandoff("m1")
	if !ok || sc.SpanID() != input.SpanContext().SpanID() {
		t.Fatalf("took %v %v; want the input span %v", sc.SpanID(), ok, input.SpanContext().SpanID())
	}
	if _, ok := telemetry.TakeHandoff("m1"); ok {
		t.Fatal("a handoff was taken twice")
	}
}

// The Prometheus handler serves the instruments in the text format.
func TestPrometheusHandler(t *testing.T) {
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: on(), Prometheus: telemetry.PrometheusConfig{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(stdctx.Background())
	for range 3 {
		telemetry.M().Inputs.Add(1, "api", "admitted")
	}
	telemetry.M().Inputs.Add(1, "webhook", "refused")
	srv := httptest.NewServer(p.PrometheusHandler())
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	got := otlptest.Scrape(t, req)
	if v := otlptest.Counter(got, "dsh_inputs_total", "entry_point", "api"); v != 3 {
		t.Fatalf("dsh_inputs_total{entry_point=api} = %v; want 3", v)
	}
	if v := otlptest.Counter(got, "dsh_inputs_total", "entry_point", "webhook"); v != 1 {
		t.Fatalf("dsh_inputs_total{entry_point=webhook} = %v; want 1", v)
	}
}
