package telemetry_test

import (
	stdctx "context"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

var sinkSeconds float64

// BenchmarkMeasure is one measurement with the attribute values a turn
// passes, in dsh's instruments and, for the floor, in the SDK's own with
// a prepared attribute set (the cheapest way to call them) and a reader
// attached: what every turn and input pays per metric, sampled or not.
func BenchmarkMeasure(b *testing.B) {
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: on()},
		provider.WithMetricReader(func(prod sdkmetric.Producer) sdkmetric.Reader {
			return sdkmetric.NewManualReader(sdkmetric.WithProducer(prod))
		}))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Shutdown(stdctx.Background())
	m := telemetry.M()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(stdctx.Background())
	sc, _ := mp.Meter("bench").Int64Counter("dsh.turns")
	sh, _ := mp.Meter("bench").Float64Histogram("gen_ai.client.operation.duration")
	cset := []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("agent", "agent-a"), attribute.String("outcome", "completed")))}
	hset := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", "some-model"), attribute.String("gen_ai.provider.name", "scripted")))}
	ctx := stdctx.Background()
	for _, c := range []struct {
		name string
		fn   func()
	}{
		{"counter/dsh", func() { m.Turns.Add(1, "agent-a", "completed") }},
		{"counter/sdk", func() { sc.Add(ctx, 1, cset...) }},
		{"histogram/dsh", func() { m.ModelDuration.Record(0.3, "chat", "some-model", "scripted") }},
		{"histogram/sdk", func() { sh.Record(ctx, 0.3, hset...) }},
		// A duration's two clock reads: what a histogram measurement
		// of a sampled-out path costs beside the record itself.
		{"duration/time.Now", func() { start := time.Now(); sinkSeconds = time.Since(start).Seconds() }},
		{"duration/telemetry.Now", func() { start := telemetry.Now(); sinkSeconds = time.Duration(telemetry.Now() - start).Seconds() }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := testkit.CPUTime()
			for b.Loop() {
				c.fn()
			}
			b.ReportMetric(float64((testkit.CPUTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
