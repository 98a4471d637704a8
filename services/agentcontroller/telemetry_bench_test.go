package agentcontroller_test

import (
	stdctx "context"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkAdmissionTelemetry is one sender delivering to one agent
// through two admission listeners that pass (BenchmarkDeliverSerial's
// background sender), with telemetry off, on with sampling 0 and on with
// sampling 1 (a span for the admission and one per listener, recorded and
// handed to a batch exporter that discards them). The floor, "without the
// telemetry code path", is the same benchmark on the tree before
// telemetry (see BENCHMARKS.md).
//
// metrics-floor is telemetry off plus, around each delivery, exactly what
// an admission's metrics take when telemetry is on — two monotonic clock
// reads, the dsh.inputs counter and the dsh.admission.duration histogram
// — done by the benchmark itself: metrics are not sampled, so this is the
// least an admission under sampling 0 can cost.
func BenchmarkAdmissionTelemetry(b *testing.B) {
	for _, mode := range []struct {
		name  string
		ratio float64
	}{{"telemetry=off", -1}, {"telemetry=metrics-floor", -1}, {"telemetry=sampling-0", 0}, {"telemetry=sampling-1", 1}} {
		b.Run(mode.name, func(b *testing.B) {
			var m *telemetry.Metrics
			if mode.name == "telemetry=metrics-floor" {
				// The instruments outlive their provider: recording into
				// them is the same atomic work, with dsh's telemetry off.
				on, zero := true, 0.0
				p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: &on, Sampling: &zero}, provider.WithMetricReader(manualReader))
				if err != nil {
					b.Fatal(err)
				}
				m = telemetry.M()
				p.Shutdown(stdctx.Background())
				if m == nil || telemetry.Enabled() {
					b.Fatal("the metrics floor needs the instruments with telemetry off")
				}
			}
			if mode.ratio >= 0 {
				on := true
				p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: &on, Sampling: &mode.ratio},
					provider.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(discard{})), provider.WithMetricReader(manualReader))
				if err != nil {
					b.Fatal(err)
				}
				defer p.Shutdown(stdctx.Background())
			}
			e := testkit.New(b)
			for range 2 {
				agentcontroller.EventAdmission.On(e.Root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
					return next.Call(ctx, a)
				})
			}
			scope, _ := e.Root.Scoped("a")
			a := &counter{id: "a", scope: scope}
			e.Registry.Reserve("a")
			e.Registry.Publish(a)
			req := testkit.Send("hello")
			ctx := stdctx.Background()
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				var start telemetry.Mono
				if m != nil {
					start = telemetry.Now()
				}
				if _, err := e.Controller.Deliver(ctx, a, req); err != nil {
					b.Fatal(err)
				}
				if m != nil {
					m.Inputs.Add(1, "unknown", "admitted")
					m.AdmissionDuration.SinceMono(start, "admitted")
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// manualReader is a metric reader that collects only when asked (never,
// here), as a Prometheus scrape does between scrapes: the metrics are
// counted as a deployment counts them.
func manualReader(p sdkmetric.Producer) sdkmetric.Reader {
	return sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
}

type discard struct{}

func (discard) ExportSpans(stdctx.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(stdctx.Context) error                             { return nil }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
