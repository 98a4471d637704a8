package mcp

import (
	"bytes"
	stdctx "context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestToolCallCarriesTraceContext: with telemetry on, a tools/call is a
// client span of the caller's trace and its request carries that span in
// _meta.traceparent, where a tracing MCP server continues from it.
func TestToolCallCarriesTraceContext(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	on := true
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: &on}, provider.WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(stdctx.Background())

	srv, _ := newTestServer()
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	var mu sync.Mutex
	var calls []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			mu.Lock()
			calls = append(calls, string(body))
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close) // before mustMount: closed after the plugin lets go of its stream
	cfg := Config{}.Defaults()
	cfg.Name, cfg.URL, cfg.Approval = "web", hs.URL, "allow"
	root, svc := mustMount(t, cfg)

	ctx, span := telemetry.Start(stdctx.Background(), "test")
	if r := call(t, ctx, root, svc, "web__echo", `{"text":"traced"}`); r.IsError {
		t.Fatalf("echo: %+v", r)
	}
	span.End()
	var client string
	for _, s := range rec.Ended() {
		if s.Name() == "tools/call echo" {
			client = s.SpanContext().SpanID().String()
			if s.Parent().TraceID() != span.SpanContext().TraceID() {
				t.Fatalf("the tools/call span is in trace %v, not the caller's", s.Parent().TraceID())
			}
		}
	}
	if client == "" {
		t.Fatal("no tools/call span")
	}
	mu.Lock()
	defer mu.Unlock()
	want := `"traceparent":"00-` + span.SpanContext().TraceID().String() + "-" + client + `-01"`
	if len(calls) != 1 || !strings.Contains(calls[0], `"_meta":{`) || !strings.Contains(calls[0], want) {
		t.Fatalf("the tools/call requests %q do not carry %s in _meta", calls, want)
	}
}
