package otlptest_test

import (
	stdctx "context"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/otlptest"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

var resource = &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "svc")}}

// What goes in over OTLP/gRPC comes out of the collector's file exporter
// and back through the package's reading intact: ids (hex in OTLP/JSON,
// base64 in protojson's mapping), parentage, kind, attributes, an error
// status, and a counter's latest cumulative value.
func TestCollectorRoundTrip(t *testing.T) {
	c := otlptest.Start(t)
	conn, err := grpc.NewClient(c.GRPCEndpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()

	trace := []byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	root, child := []byte{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, []byte{1, 2, 3, 4, 5, 6, 7, 8}
	now := uint64(time.Now().UnixNano())
	_, err = coltracepb.NewTraceServiceClient(conn).Export(ctx, &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: resource,
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
			{TraceId: trace, SpanId: root, Name: "root", Kind: tracepb.Span_SPAN_KIND_SERVER, StartTimeUnixNano: now, EndTimeUnixNano: now + 2000},
			{TraceId: trace, SpanId: child, ParentSpanId: root, Name: "child", StartTimeUnixNano: now + 1000, EndTimeUnixNano: now + 1500,
				Attributes: []*commonpb.KeyValue{str("k", "v")}, Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "boom"}},
		}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	tr := otlptest.Await(t, c, 10*time.Second, "root", "root", "child")
	r, ch := tr.Find("root"), tr.Find("child")
	if tr.ID != "4bf92f3577b34da6a3ce929d0e0e4736" || r.SpanID != "00f067aa0ba902b7" || r.ParentID != "" || tr.Parent(ch) != r {
		t.Fatalf("ids or parentage lost:\n%s%+v\n%+v", tr.Names(), r, ch)
	}
	if r.Kind != "SPAN_KIND_SERVER" || r.Service != "svc" || r.Duration != 2000 || ch.Attributes["k"] != "v" || ch.Error != "boom" || r.Error != "" {
		t.Fatalf("root %+v child %+v", r, ch)
	}
	if tr.Spans[0].Name != "root" {
		t.Fatalf("the trace is not oldest first:\n%s", tr.Names())
	}

	// Two exports of one cumulative series: the later one is the count.
	for _, v := range []int64{2, 5} {
		_, err = colmetricpb.NewMetricsServiceClient(conn).Export(ctx, &colmetricpb.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
			Resource: resource,
			ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{Name: "n", Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{
				AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, IsMonotonic: true,
				DataPoints: []*metricspb.NumberDataPoint{
					{Attributes: []*commonpb.KeyValue{str("a", "x")}, TimeUnixNano: now, Value: &metricspb.NumberDataPoint_AsInt{AsInt: v}},
					{Attributes: []*commonpb.KeyValue{str("a", "y")}, TimeUnixNano: now, Value: &metricspb.NumberDataPoint_AsInt{AsInt: 100}},
				},
			}}}}}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	otlptest.AwaitSum(t, c, 10*time.Second, 5, "n", "a", "x")
	otlptest.AwaitSum(t, c, 10*time.Second, 105, "n")
}
