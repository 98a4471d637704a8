// Package otlptest is an OTLP receiver for tests: it takes traces and
// metrics over OTLP/gRPC and OTLP/HTTP (protobuf), decoded with the
// protocol's own generated types (go.opentelemetry.io/proto/otlp), and
// answers queries about what it received over an HTTP API shaped like
// Jaeger's (/api/traces/{id}, /api/traces?service=…).
//
// It stands in for Jaeger all-in-one, which the telemetry tests were meant
// to start: Jaeger v1.76.0 as a Go tool adds some 330 modules to go.mod and
// took 6 CPU-minutes to build here, far over the CI budget. What dsh sends
// still goes through the real OTLP exporters, gRPC and protobuf encoding;
// only the storage is this package's.
package otlptest

import (
	stdctx "context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span as the query API returns it.
type Span struct {
	TraceID    string         `json:"traceID"`
	SpanID     string         `json:"spanID"`
	ParentID   string         `json:"parentSpanID,omitempty"`
	Name       string         `json:"operationName"`
	Kind       string         `json:"kind"`
	Service    string         `json:"serviceName"`
	Start      time.Time      `json:"startTime"`
	Duration   time.Duration  `json:"duration"`
	Attributes map[string]any `json:"tags"`
	Error      string         `json:"error,omitempty"`
}

// Receiver is a running receiver.
type Receiver struct {
	grpcAddr string
	httpURL  string
	grpc     *grpc.Server
	http     *http.Server

	mu      sync.Mutex
	spans   []Span
	metrics int // metric export requests received
	changed chan struct{}
}

// Start starts a receiver on loopback ports; it stops when the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{grpcAddr: gl.Addr().String(), httpURL: "http://" + hl.Addr().String(), changed: make(chan struct{})}
	r.grpc = grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(r.grpc, traceService{r: r})
	colmetricpb.RegisterMetricsServiceServer(r.grpc, metricService{r: r})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.postTraces)
	mux.HandleFunc("POST /v1/metrics", r.postMetrics)
	mux.HandleFunc("GET /api/traces/{id}", r.getTrace)
	mux.HandleFunc("GET /api/traces", r.findTraces)
	r.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.grpc.Serve(gl) }()
	go func() { _ = r.http.Serve(hl) }()
	t.Cleanup(func() {
		r.grpc.Stop()
		_ = r.http.Close()
	})
	return r
}

// GRPCEndpoint is host:port for OTLP/gRPC.
func (r *Receiver) GRPCEndpoint() string { return r.grpcAddr }

// HTTPEndpoint is the base URL for OTLP/HTTP (the exporter adds /v1/traces).
func (r *Receiver) HTTPEndpoint() string { return r.httpURL }

// QueryURL is the base URL of the query API.
func (r *Receiver) QueryURL() string { return r.httpURL }

// MetricExports is how many metric export requests arrived.
func (r *Receiver) MetricExports() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.metrics
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(_ stdctx.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.r.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

type metricService struct {
	colmetricpb.UnimplementedMetricsServiceServer
	r *Receiver
}

func (s metricService) Export(_ stdctx.Context, _ *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	s.r.mu.Lock()
	s.r.metrics++
	s.r.mu.Unlock()
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

func (r *Receiver) postTraces(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &in); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&in)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) postMetrics(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	r.metrics++
	r.mu.Unlock()
	out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) add(req *coltracepb.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
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
				if sp.Status != nil && sp.Status.Code == 2 {
					s.Error = sp.Status.Message
				}
				got = append(got, s)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
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

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

func (r *Receiver) trace(id string) []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Span
	for _, s := range r.spans {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// traceResponse is the query API's answer, as Jaeger's: data holds traces.
type traceResponse struct {
	Data []traceData `json:"data"`
}

type traceData struct {
	TraceID string `json:"traceID"`
	Spans   []Span `json:"spans"`
}

func (r *Receiver) getTrace(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	spans := r.trace(id)
	if len(spans) == 0 {
		http.Error(w, `{"errors":[{"msg":"trace not found"}]}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(traceResponse{Data: []traceData{{TraceID: id, Spans: spans}}})
}

// findTraces answers ?service=…&operation=… with the traces holding a
// matching span.
func (r *Receiver) findTraces(w http.ResponseWriter, req *http.Request) {
	service, op := req.URL.Query().Get("service"), req.URL.Query().Get("operation")
	seen := map[string]bool{}
	var ids []string
	for _, s := range r.Spans() {
		if (service == "" || s.Service == service) && (op == "" || s.Name == op) && !seen[s.TraceID] {
			seen[s.TraceID] = true
			ids = append(ids, s.TraceID)
		}
	}
	var out traceResponse
	for _, id := range ids {
		out.Data = append(out.Data, traceData{TraceID: id, Spans: r.trace(id)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// Query fetches the traces holding a span named op (any when "") through
// the query API, as a test would ask Jaeger.
func Query(t testing.TB, base, op string) []Trace {
	t.Helper()
	resp, err := http.Get(base + "/api/traces?operation=" + url.QueryEscape(op))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/traces?operation=%s: %s", op, resp.Status)
	}
	var out traceResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	traces := make([]Trace, 0, len(out.Data))
	for _, d := range out.Data {
		traces = append(traces, Trace{ID: d.TraceID, Spans: d.Spans})
	}
	return traces
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

// Await waits until a trace holding a span named op has spans named each
// of names, and returns it; it fails the test after patience.
func Await(t testing.TB, r *Receiver, patience time.Duration, op string, names ...string) Trace {
	t.Helper()
	deadline := time.After(patience)
	for {
		r.mu.Lock()
		changed := r.changed
		r.mu.Unlock()
		for _, tr := range Query(t, r.QueryURL(), op) {
			if tr.hasAll(names) {
				return tr
			}
		}
		select {
		case <-changed:
		case <-deadline:
			var got []string
			for _, s := range r.Spans() {
				got = append(got, s.Name+" ("+s.TraceID[:8]+")")
			}
			t.Fatalf("no trace with %q holds all of %q within %s; received %q", op, names, patience, got)
			return Trace{}
		}
	}
}

func (tr Trace) hasAll(names []string) bool {
	for _, n := range names {
		if tr.Find(n) == nil {
			return false
		}
	}
	return true
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
