package agentloop_test

import (
	stdctx "context"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkTurnTelemetry is BenchmarkTurn with telemetry off, on with
// sampling 0 (spans made, not recorded) and on with sampling 1 (spans
// recorded and handed to a batch exporter that discards them), metrics
// counted in either case. It reports
// the process's CPU time per turn beside wall time: the turn runs on the
// agent's goroutine. The floor, "without the telemetry code path", is the
// same benchmark on the tree before telemetry (see BENCHMARKS.md).
func BenchmarkTurnTelemetry(b *testing.B) {
	for _, mode := range telemetryModes {
		b.Run(mode.name, func(b *testing.B) {
			stop := mode.setup(b)
			defer stop()
			e := newEnv(b, []scripted.Reply{{Text: "Sure, here is a short answer."}}, agentloop.Config{})
			a := e.create("a").Agent
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				runTurn(b, a)
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

type telemetryMode struct {
	name  string
	setup func(testing.TB) func()
}

var telemetryModes = []telemetryMode{
	{"telemetry=off", func(testing.TB) func() { return func() {} }},
	{"telemetry=sampling-0", func(tb testing.TB) func() { return setupTelemetry(tb, 0) }},
	{"telemetry=sampling-1", func(tb testing.TB) func() { return setupTelemetry(tb, 1) }},
}

func setupTelemetry(tb testing.TB, ratio float64) func() {
	on := true
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: &on, Sampling: &ratio},
		provider.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(discard{})), provider.WithMetricReader(manualReader))
	if err != nil {
		tb.Fatal(err)
	}
	return func() { p.Shutdown(stdctx.Background()) }
}

// discard is an exporter that drops what it is given, so a sampled run
// pays for recording and batching but not for a network.
// manualReader is a metric reader that collects only when asked (never,
// here), as a Prometheus scrape does between scrapes: the metrics are
// counted as a deployment counts them.
func manualReader(p sdkmetric.Producer) sdkmetric.Reader {
	return sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
}

type discard struct{}

func (discard) ExportSpans(stdctx.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(stdctx.Context) error                             { return nil }

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
