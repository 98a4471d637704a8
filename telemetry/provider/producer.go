package provider

import (
	stdctx "context"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// producer hands dsh's instruments to a metric reader at each
// collection, as the SDK's own instruments would be: dsh records into
// cells of its own (package telemetry says why) and the SDK reads them
// only when it exports or is scraped.
type producer struct {
	m atomic.Pointer[telemetry.Metrics]
}

func (p *producer) Produce(stdctx.Context) ([]metricdata.ScopeMetrics, error) {
	m := p.m.Load()
	if m == nil {
		return nil, nil
	}
	now := time.Now()
	var out []metricdata.Metrics
	for _, r := range m.Read() {
		if len(r.Points) == 0 {
			continue
		}
		out = append(out, metricdata.Metrics{Name: r.Name, Description: r.Description, Unit: r.Unit, Data: aggregation(r, now)})
	}
	if len(out) == 0 {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{{Scope: instrumentation.Scope{Name: telemetry.ScopeName}, Metrics: out}}, nil
}

func aggregation(r telemetry.Reading, now time.Time) metricdata.Aggregation {
	switch r.Kind {
	case telemetry.KindFloatCounter:
		s := metricdata.Sum[float64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true}
		for _, p := range r.Points {
			s.DataPoints = append(s.DataPoints, metricdata.DataPoint[float64]{Attributes: p.Attrs, StartTime: r.Start, Time: now, Value: p.Float})
		}
		return s
	case telemetry.KindHistogram:
		h := metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality}
		for _, p := range r.Points {
			h.DataPoints = append(h.DataPoints, metricdata.HistogramDataPoint[float64]{
				Attributes: p.Attrs, StartTime: r.Start, Time: now, Count: p.Count, Sum: p.Sum,
				Bounds: p.Bounds, BucketCounts: p.Buckets,
				Min: metricdata.NewExtrema(p.Min), Max: metricdata.NewExtrema(p.Max),
			})
		}
		return h
	default:
		s := metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: r.Kind == telemetry.KindCounter}
		for _, p := range r.Points {
			s.DataPoints = append(s.DataPoints, metricdata.DataPoint[int64]{Attributes: p.Attrs, StartTime: r.Start, Time: now, Value: p.Int})
		}
		return s
	}
}
