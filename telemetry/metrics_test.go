package telemetry_test

import (
	stdctx "context"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// setupReader installs telemetry with sampling ratio and a manual reader
// the test collects from.
func setupReader(t *testing.T, ratio float64) (*provider.Provider, *sdkmetric.ManualReader) {
	t.Helper()
	var r *sdkmetric.ManualReader
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: on(), Sampling: &ratio},
		provider.WithMetricReader(func(prod sdkmetric.Producer) sdkmetric.Reader {
			r = sdkmetric.NewManualReader(sdkmetric.WithProducer(prod))
			return r
		}))
	if err != nil {
		t.Fatal(err)
	}
	return p, r
}

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(stdctx.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sm.Scope.Name != telemetry.ScopeName {
				t.Fatalf("%s is in scope %q; want %q", m.Name, sm.Scope.Name, telemetry.ScopeName)
			}
			out[m.Name] = m.Data
		}
	}
	return out
}

func attrs(kv ...string) attribute.Set {
	var out []attribute.KeyValue
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, attribute.String(kv[i], kv[i+1]))
	}
	return attribute.NewSet(out...)
}

// Metrics are not sampled: with sampling 0 every measurement reaches the
// reader, counters as cumulative sums by attribute set and histograms
// with their buckets, count, sum and extremes.
func TestMetricsUnderSamplingZero(t *testing.T) {
	p, r := setupReader(t, 0)
	defer p.Shutdown(stdctx.Background())
	m := telemetry.M()
	for range 3 {
		m.Inputs.Add(1, "api", "admitted")
	}
	m.Inputs.Add(1, "webhook", "refused")
	m.Cost.Add(0.25, "a", "m", "token:t", "", "USD")
	m.Cost.Add(0.5, "a", "m", "token:t", "", "USD")
	m.Cost.Add(-1, "a", "m", "token:t", "", "USD") // a counter does not go down
	m.SSESubscribers.Add(2)
	m.SSESubscribers.Add(-1)
	m.AdmissionDuration.Record(0.002, "admitted")
	m.AdmissionDuration.Record(0.02, "admitted")
	m.AdmissionDuration.Record(0.01, "admitted") // on a bound: in the bucket it closes

	got := collect(t, r)
	in, ok := got["dsh.inputs"].(metricdata.Sum[int64])
	if !ok || !in.IsMonotonic || in.Temporality != metricdata.CumulativeTemporality {
		t.Fatalf("dsh.inputs = %#v; want a monotonic cumulative int64 sum", got["dsh.inputs"])
	}
	api, webhook := attrs("entry_point", "api", "outcome", "admitted"), attrs("entry_point", "webhook", "outcome", "refused")
	want := map[attribute.Distinct]int64{api.Equivalent(): 3, webhook.Equivalent(): 1}
	if len(in.DataPoints) != len(want) {
		t.Fatalf("dsh.inputs has %d points; want %d", len(in.DataPoints), len(want))
	}
	for _, dp := range in.DataPoints {
		if w, ok := want[dp.Attributes.Equivalent()]; !ok || dp.Value != w {
			t.Fatalf("dsh.inputs%v = %d; want %d", dp.Attributes.ToSlice(), dp.Value, w)
		}
	}
	cost := got["dsh.cost"].(metricdata.Sum[float64])
	if len(cost.DataPoints) != 1 || cost.DataPoints[0].Value != 0.75 {
		t.Fatalf("dsh.cost = %+v; want one point of 0.75", cost.DataPoints)
	}
	if v, _ := cost.DataPoints[0].Attributes.Value("currency"); v.AsString() != "USD" {
		t.Fatalf("dsh.cost's currency = %q; want USD", v.AsString())
	}
	sse := got["dsh.sse.subscribers"].(metricdata.Sum[int64])
	if sse.IsMonotonic || len(sse.DataPoints) != 1 || sse.DataPoints[0].Value != 1 {
		t.Fatalf("dsh.sse.subscribers = %+v; want a non-monotonic sum of 1", sse)
	}
	h := got["dsh.admission.duration"].(metricdata.Histogram[float64])
	if len(h.DataPoints) != 1 {
		t.Fatalf("dsh.admission.duration has %d points; want 1", len(h.DataPoints))
	}
	dp := h.DataPoints[0]
	if dp.Count != 3 || dp.Sum < 0.0319 || dp.Sum > 0.0321 {
		t.Fatalf("dsh.admission.duration count %d sum %v; want 3 and 0.032", dp.Count, dp.Sum)
	}
	if mn, _ := dp.Min.Value(); mn != 0.002 {
		t.Fatalf("min = %v; want 0.002", mn)
	}
	if mx, _ := dp.Max.Value(); mx != 0.02 {
		t.Fatalf("max = %v; want 0.02", mx)
	}
	if len(dp.BucketCounts) != len(dp.Bounds)+1 {
		t.Fatalf("%d buckets for %d bounds", len(dp.BucketCounts), len(dp.Bounds))
	}
	for i, n := range dp.BucketCounts {
		var w uint64
		switch {
		case i > 0 && dp.Bounds[i-1] < 0.002 && 0.002 <= dp.Bounds[i]:
			w = 1
		case i < len(dp.Bounds) && dp.Bounds[i] == 0.01:
			w = 1 // (0.005, 0.01] holds 0.01
		case i > 0 && i < len(dp.Bounds) && dp.Bounds[i-1] < 0.02 && 0.02 <= dp.Bounds[i]:
			w = 1
		}
		if n != w {
			t.Fatalf("bucket %d (bounds %v) holds %d; want %d: %v", i, dp.Bounds, n, w, dp.BucketCounts)
		}
	}
}

// The periodic reader's last export at Shutdown, made after telemetry is
// off, still carries the installation's instruments; and counting from
// many goroutines loses nothing.
func TestMetricsConcurrentAndAtShutdown(t *testing.T) {
	exp := &captured{}
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: on()},
		provider.WithMetricReader(func(prod sdkmetric.Producer) sdkmetric.Reader {
			return sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour), sdkmetric.WithProducer(prod))
		}))
	if err != nil {
		t.Fatal(err)
	}
	m := telemetry.M()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 1000 {
				m.Turns.Add(1, "a", "done")
				m.ModelDuration.Record(0.1, "chat", "m", "scripted")
				if g%2 == 0 {
					m.Steps.Add(1, "b")
				}
			}
		})
	}
	wg.Wait()
	if err := p.Shutdown(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	exp.mu.Lock()
	defer exp.mu.Unlock()
	if exp.last == nil {
		t.Fatal("nothing was exported at Shutdown")
	}
	var turns, steps int64
	var model uint64
	for _, sm := range exp.last.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					switch mt.Name {
					case "dsh.turns":
						turns += dp.Value
					case "dsh.steps":
						steps += dp.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					model += dp.Count
				}
			}
		}
	}
	if turns != 8000 || steps != 4000 || model != 8000 {
		t.Fatalf("exported turns %d, steps %d, model requests %d; want 8000, 4000, 8000", turns, steps, model)
	}
}

// captured is a metric exporter that keeps the last export.
type captured struct {
	mu   sync.Mutex
	last *metricdata.ResourceMetrics
}

func (c *captured) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

func (c *captured) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

func (c *captured) Export(_ stdctx.Context, rm *metricdata.ResourceMetrics) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = rm
	return nil
}

func (c *captured) ForceFlush(stdctx.Context) error { return nil }
func (c *captured) Shutdown(stdctx.Context) error   { return nil }
