package otlptest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Span is one span the collector received, flattened for assertions.
type Span struct {
	TraceID    string // hex
	SpanID     string // hex
	ParentID   string // hex; "" for a root
	Name       string
	Kind       string // as the protocol's enum names it: SPAN_KIND_SERVER…
	Service    string // the resource's service.name
	Start      time.Time
	Duration   time.Duration
	Attributes map[string]any
	Error      string // the status message of a span whose status is an error
}

// lines reads the complete lines of an exporter's file: the last one may
// still be half written.
func lines(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i]
	} else {
		return nil, nil
	}
	return bytes.Split(data, []byte("\n")), nil
}

// The ids the file exporter writes are hex, as the OTLP/JSON encoding
// wants them; protojson's mapping of bytes is base64. These are the keys
// whose values have to be re-encoded before protojson reads a line.
var idKeys = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true}

func unmarshal(line []byte, m proto.Message) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if err := hexToBase64(v); err != nil {
		return err
	}
	std, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(std, m)
}

func hexToBase64(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && idKeys[k] {
				b, err := hex.DecodeString(s)
				if err != nil {
					return fmt.Errorf("%s %q is not hex: %w", k, s, err)
				}
				x[k] = base64.StdEncoding.EncodeToString(b)
				continue
			}
			if err := hexToBase64(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := hexToBase64(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Spans returns every span the collector has written out so far.
func (c *Collector) Spans(t testing.TB) []Span {
	t.Helper()
	ls, err := lines(c.traces)
	if err != nil {
		t.Fatal(err)
	}
	var out []Span
	for _, l := range ls {
		var td tracepb.TracesData
		if err := unmarshal(l, &td); err != nil {
			t.Fatalf("the file exporter wrote a line that is no OTLP/JSON TracesData: %v\n%s", err, l)
		}
		for _, rs := range td.GetResourceSpans() {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					out = append(out, flatten(sp, service))
				}
			}
		}
	}
	return out
}

func flatten(sp *tracepb.Span, service string) Span {
	s := Span{
		TraceID: hex.EncodeToString(sp.TraceId), SpanID: hex.EncodeToString(sp.SpanId),
		Name: sp.Name, Kind: sp.Kind.String(), Service: service,
		Start:      time.Unix(0, int64(sp.StartTimeUnixNano)),
		Duration:   time.Duration(sp.EndTimeUnixNano - sp.StartTimeUnixNano),
		Attributes: map[string]any{},
	}
	if len(sp.ParentSpanId) > 0 {
		s.ParentID = hex.EncodeToString(sp.ParentSpanId)
	}
	for _, kv := range sp.Attributes {
		s.Attributes[kv.Key] = value(kv.Value)
	}
	if sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		s.Error = sp.Status.Message
	}
	return s
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// Traces groups the spans received so far by trace, keeping the traces
// that hold a span named op (all when op is ""), in the order they
// arrived.
func (c *Collector) Traces(t testing.TB, op string) []Trace {
	t.Helper()
	byID := map[string]*Trace{}
	var order []string
	for _, s := range c.Spans(t) {
		tr := byID[s.TraceID]
		if tr == nil {
			tr = &Trace{ID: s.TraceID}
			byID[s.TraceID] = tr
			order = append(order, s.TraceID)
		}
		tr.Spans = append(tr.Spans, s)
	}
	var out []Trace
	for _, id := range order {
		tr := *byID[id]
		if op != "" && tr.Find(op) == nil {
			continue
		}
		sort.SliceStable(tr.Spans, func(i, j int) bool { return tr.Spans[i].Start.Before(tr.Spans[j].Start) })
		out = append(out, tr)
	}
	return out
}

// Trace is one trace's spans, oldest first.
type Trace struct {
	ID    string
	Spans []Span
}

// Find returns the first span named name, or nil.
func (tr Trace) Find(name string) *Span {
	for i := range tr.Spans {
		if tr.Spans[i].Name == name {
			return &tr.Spans[i]
		}
	}
	return nil
}

// FindPrefix returns the first span whose name starts with prefix, or nil.
func (tr Trace) FindPrefix(prefix string) *Span {
	for i := range tr.Spans {
		if strings.HasPrefix(tr.Spans[i].Name, prefix) {
			return &tr.Spans[i]
		}
	}
	return nil
}

// Parent returns s's parent in the trace, or nil.
func (tr Trace) Parent(s *Span) *Span {
	for i := range tr.Spans {
		if tr.Spans[i].SpanID == s.ParentID {
			return &tr.Spans[i]
		}
	}
	return nil
}

// Ancestor reports whether a span named name is above s.
func (tr Trace) Ancestor(s *Span, name string) bool {
	for p := tr.Parent(s); p != nil; p = tr.Parent(p) {
		if p.Name == name {
			return true
		}
	}
	return false
}

func (tr Trace) hasAll(names []string) bool {
	for _, n := range names {
		if tr.Find(n) == nil {
			return false
		}
	}
	return true
}

// Names lists the trace's spans as name <- parent name, for failure
// messages.
func (tr Trace) Names() string {
	var b strings.Builder
	for i := range tr.Spans {
		s := &tr.Spans[i]
		parent := "(root)"
		if p := tr.Parent(s); p != nil {
			parent = p.Name
		} else if s.ParentID != "" {
			parent = "(remote " + s.ParentID + ")"
		}
		fmt.Fprintf(&b, "  %s [%s] <- %s\n", s.Name, s.Service, parent)
	}
	return b.String()
}

// Await waits until a trace holding a span named op has spans named each
// of names, and returns it; it fails the test after patience.
func Await(t testing.TB, c *Collector, patience time.Duration, op string, names ...string) Trace {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		for _, tr := range c.Traces(t, op) {
			if tr.hasAll(names) {
				return tr
			}
		}
		if time.Now().After(deadline) {
			var got []string
			for _, s := range c.Spans(t) {
				got = append(got, s.Name+" ("+s.TraceID[:8]+")")
			}
			t.Fatalf("no trace with %q holds all of %q within %s; the collector wrote %q", op, names, patience, got)
			return Trace{}
		}
		time.Sleep(flushEvery)
	}
}

// Sum is the latest value of the cumulative sum metric name, added up
// over the series whose attributes include every pair of attrs (name,
// value, name, value…), as the collector received it over OTLP; each
// export carries the whole count so far, so a later one replaces an
// earlier one of the same series.
func (c *Collector) Sum(t testing.TB, name string, attrs ...string) float64 {
	t.Helper()
	ls, err := lines(c.metrics)
	if err != nil {
		t.Fatal(err)
	}
	latest := map[string]float64{}
	for _, l := range ls {
		var md metricspb.MetricsData
		if err := unmarshal(l, &md); err != nil {
			t.Fatalf("the file exporter wrote a line that is no OTLP/JSON MetricsData: %v\n%s", err, l)
		}
		for _, rm := range md.GetResourceMetrics() {
			res := series(rm.GetResource().GetAttributes())
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					sum := m.GetSum()
					if m.Name != name || sum == nil {
						continue
					}
					if sum.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
						t.Fatalf("%s is exported as %s; Sum reads cumulative sums", name, sum.AggregationTemporality)
					}
					for _, dp := range sum.GetDataPoints() {
						if !hasAttrs(dp.GetAttributes(), attrs) {
							continue
						}
						v := dp.GetAsDouble()
						if _, ok := dp.GetValue().(*metricspb.NumberDataPoint_AsInt); ok {
							v = float64(dp.GetAsInt())
						}
						latest[res+"|"+series(dp.GetAttributes())] = v
					}
				}
			}
		}
	}
	total := 0.0
	for _, v := range latest {
		total += v
	}
	return total
}

func series(kvs []*commonpb.KeyValue) string {
	var parts []string
	for _, kv := range kvs {
		parts = append(parts, fmt.Sprintf("%s=%v", kv.Key, value(kv.Value)))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func hasAttrs(kvs []*commonpb.KeyValue, attrs []string) bool {
	for i := 0; i+1 < len(attrs); i += 2 {
		found := false
		for _, kv := range kvs {
			if kv.Key == attrs[i] && fmt.Sprint(value(kv.Value)) == attrs[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// AwaitSum waits until Sum(name, attrs…) is want and fails the test after
// patience: metrics reach the file a flush after their export.
func AwaitSum(t testing.TB, c *Collector, patience time.Duration, want float64, name string, attrs ...string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		got := c.Sum(t, name, attrs...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v is %v after %s; want %v", name, attrs, got, patience, want)
		}
		time.Sleep(flushEvery)
	}
}
