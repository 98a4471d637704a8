package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/internal/otlptest"
	"github.com/nats-io/nats-server/v2/server"
)

// Test trace context a client sends: dsh serve continues its trace.
const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
)

type apiClient struct {
	t     *testing.T
	base  string
	token string
}

func (c apiClient) call(method, path, body string, header ...string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// TestTelemetryOneTraceThroughServe: a prompt sent to dsh serve with a
// traceparent, admitted by a plugin binary, answered with a tool call that
// a person approves over the API, is one trace in the receiver — the
// client's — with the parent-child structure docs/telemetry.md promises;
// the plugin binary got the trace context in its gRPC metadata; and
// /metrics, read with the Prometheus parser, and the OTLP metrics the
// collector received count the inputs sent.
func TestTelemetryOneTraceThroughServe(t *testing.T) {
	r := otlptest.Start(t)
	seen := filepath.Join(t.TempDir(), "traceparents")
	path := filepath.Join(t.TempDir(), "config.yaml")
	cfg := fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: clock}]
        - text: "it is time"
  - use: tools.clock
  - use: tools.permission
    config: {rules: [{tool: clock, decision: ask}]}
  - id: guard
    exec: %s
    config: {traceparent_file: %q, refuse_word: forbidden}
agents:
  - id: main
    provider: scripted
telemetry:
  enabled: true
  endpoint: %s
  insecure: true
  service_name: dsh-e2e
  metrics_interval: 200ms
  prometheus: {enabled: true}
log: {level: debug, json: true}
`, testplugin(t), seen, r.GRPCEndpoint())
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	token := "telemetry-token-41c9"
	p := startServe(t, path, "DSH_SERVE_TOKEN="+token)
	c := apiClient{t: t, base: p.base, token: token}
	if code, out := c.call("POST", "/v1/sessions", `{"session_id":"t1"}`); code != 201 {
		t.Fatalf("open: %d %s", code, out)
	}
	traceparent := "00-" + clientTrace + "-" + clientSpan + "-01"
	if code, out := c.call("POST", "/v1/sessions/t1/messages", `{"request_id":"r1","content":"what time is it?"}`, "traceparent", traceparent); code != 202 {
		t.Fatalf("message: %d %s", code, out)
	}
	// The tool call asks; a person answers over the API.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pending struct {
			Approvals []struct {
				ID int64 `json:"id"`
			} `json:"approvals"`
		}
		_, out := c.call("GET", "/v1/sessions/t1/approvals", "")
		json.Unmarshal([]byte(out), &pending)
		if len(pending.Approvals) == 1 {
			if code, out := c.call("POST", fmt.Sprintf("/v1/sessions/t1/approvals/%d", pending.Approvals[0].ID), `{"choice":"allow-once"}`); code != 200 {
				t.Fatalf("answer: %d %s", code, out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no approval pending: %s\n%s", out, p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A refused input counts too.
	if code, out := c.call("POST", "/v1/sessions/t1/messages", `{"request_id":"r2","content":"forbidden fruit"}`); code < 400 {
		t.Fatalf("a refused message: %d %s", code, out)
	}

	tr := otlptest.Await(t, r, 30*time.Second, "dsh.turn", "dsh.input serve", "dsh.admission", "dsh.turn", "dsh.step",
		"execute_tool clock", "dsh.approval", "dsh.approval.ask", "dsh.session.flush")
	if tr.ID != clientTrace {
		t.Fatalf("the prompt's trace is %s, not the client's %s:\n%s", tr.ID, clientTrace, tr.Names())
	}
	must := func(name string) *otlptest.Span {
		t.Helper()
		s := tr.Find(name)
		if s == nil {
			s = tr.FindPrefix(name)
		}
		if s == nil {
			t.Fatalf("no span %q in the trace:\n%s", name, tr.Names())
		}
		return s
	}
	parentOf := func(child, parent string) {
		t.Helper()
		if p := tr.Parent(must(child)); p == nil || !strings.HasPrefix(p.Name, parent) {
			t.Fatalf("%s is not a child of %s:\n%s", child, parent, tr.Names())
		}
	}
	under := func(child, ancestor string) {
		t.Helper()
		if !tr.Ancestor(must(child), ancestor) {
			t.Fatalf("%s is not under %s:\n%s", child, ancestor, tr.Names())
		}
	}
	served := must("dsh serve POST /v1/sessions/{id}/messages")
	if served.ParentID != clientSpan || served.Kind != "SPAN_KIND_SERVER" || served.Service != "dsh-e2e" {
		t.Fatalf("the request's span %+v does not continue the client's span %s", served, clientSpan)
	}
	parentOf("dsh.input serve", "dsh serve POST")
	parentOf("dsh.admission", "dsh.input serve")
	parentOf("agent-controller/admission exec:guard", "dsh.admission")
	parentOf("dsh.plugin Call agent-controller/admission", "agent-controller/admission exec:guard")
	parentOf("dsh.turn", "dsh.input serve")
	parentOf("dsh.step", "dsh.turn")
	parentOf("chat", "dsh.step")
	parentOf("execute_tool clock", "dsh.step")
	parentOf("dsh.approval", "execute_tool clock")
	under("dsh.approval.ask", "dsh.approval")
	under("dsh.session.flush", "dsh.turn")
	ask := must("dsh.approval.ask")
	if ask.Attributes["dsh.approval.answerer"] != "person" || ask.Attributes["dsh.approval.verdict"] != "allow-once" {
		t.Fatalf("the approval's span says %v", ask.Attributes)
	}
	adm := must("dsh.admission")
	if adm.Attributes["dsh.admission.verdict"] != "admitted" || adm.Attributes["dsh.entry_point"] != "serve" || adm.Attributes["dsh.request_id"] != "r1" {
		t.Fatalf("the admission's span says %v", adm.Attributes)
	}
	listener := must("agent-controller/admission exec:guard")
	if listener.Attributes["dsh.listener.passed"] != true {
		t.Fatalf("the plugin's listener span says %v", listener.Attributes)
	}
	chat := must("chat")
	if chat.Attributes["gen_ai.operation.name"] != "chat" || chat.Attributes["gen_ai.provider.name"] != "scripted" {
		t.Fatalf("the model span says %v", chat.Attributes)
	}
	if _, ok := chat.Attributes["gen_ai.response.time_to_first_chunk"]; !ok {
		t.Fatalf("the model span has no time to first chunk: %v", chat.Attributes)
	}
	if _, ok := chat.Attributes["gen_ai.input.messages"]; ok {
		t.Fatal("the prompt is on a span though telemetry.content is off")
	}

	// The plugin binary read the trace context from its call's metadata.
	data, _ := os.ReadFile(seen)
	if !strings.Contains(string(data), "00-"+clientTrace+"-") {
		t.Fatalf("the plugin saw traceparents %q", data)
	}

	// /metrics wants the API's token and counts what was sent.
	req, _ := http.NewRequest("GET", p.base+"/metrics", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("/metrics without a token: %v %v", resp.StatusCode, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	fams := otlptest.Scrape(t, req)
	if got := otlptest.Counter(fams, "dsh_inputs_total", "entry_point", "serve", "outcome", "admitted"); got != 1 {
		t.Fatalf("dsh_inputs_total admitted = %v; want 1", got)
	}
	if got := otlptest.Counter(fams, "dsh_inputs_total", "entry_point", "serve", "outcome", "refused"); got != 1 {
		t.Fatalf("dsh_inputs_total refused = %v; want 1", got)
	}
	if got := otlptest.Counter(fams, "dsh_tool_calls_total", "tool", "clock", "outcome", "ok"); got != 1 {
		t.Fatalf("dsh_tool_calls_total clock ok = %v; want 1", got)
	}
	if got := otlptest.Counter(fams, "dsh_approvals_total", "answerer", "person"); got != 1 {
		t.Fatalf("dsh_approvals_total by a person = %v; want 1", got)
	}
	if got := otlptest.Counter(fams, "dsh_turns_total", "outcome", "completed"); got != 1 {
		t.Fatalf("dsh_turns_total completed = %v; want 1: %v", got, fams["dsh_turns_total"])
	}
	if strings.Contains(p.log.String(), token) {
		t.Fatal("the token is in the log (at debug level)")
	}

	// The JSON log line of the message's request carries the trace and
	// span ids of the request's span.
	var logged bool
	for _, line := range strings.Split(p.log.String(), "\n") {
		var l struct {
			Msg     string `json:"msg"`
			Method  string `json:"method"`
			Path    string `json:"path"`
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "request" || l.Method != "POST" || l.Path != "/v1/sessions/t1/messages" || l.TraceID != clientTrace {
			continue
		}
		if l.SpanID != served.SpanID {
			t.Fatalf("the request's log line has span_id %s; its span is %s", l.SpanID, served.SpanID)
		}
		logged = true
	}
	if !logged {
		t.Fatalf("no JSON log line of the message's request with trace_id %s:\n%s", clientTrace, p.log.String())
	}

	// hclog's JSON lines of the controller and the loop carry the ids of
	// the span they were logged under: the admission's decision that of
	// dsh.admission, the turn's start and end that of dsh.turn.
	turn := must("dsh.turn")
	hcl := hclogLines(t, p.log.String())
	wantLine := func(msg, traceID, spanID string, match func(hclogLine) bool) {
		t.Helper()
		for _, l := range hcl {
			if l.Message == msg && match(l) {
				if l.TraceID != traceID || l.SpanID != spanID {
					t.Fatalf("%q logged with trace_id %q span_id %q; want %q %q:\n%s", msg, l.TraceID, l.SpanID, traceID, spanID, p.log.String())
				}
				return
			}
		}
		t.Fatalf("no %q line:\n%s", msg, p.log.String())
	}
	r1 := func(l hclogLine) bool { return l.RequestID == "r1" }
	turn1 := func(l hclogLine) bool { return l.Turn == 1 }
	wantLine("admission decided", clientTrace, adm.SpanID, r1)
	wantLine("turn started", clientTrace, turn.SpanID, turn1)
	wantLine("turn ended", clientTrace, turn.SpanID, turn1)
	// The refused message came without a traceparent: its decision is
	// logged under a trace of its own.
	for _, l := range hcl {
		if l.Message == "admission decided" && l.RequestID == "r2" && (len(l.TraceID) != 32 || l.TraceID == clientTrace || l.Verdict != "refuse") {
			t.Fatalf("the refusal of r2 is logged as %+v; want a verdict refuse under a trace of its own", l)
		}
	}
	if strings.Contains(p.log.String(), "what time is it?") {
		t.Fatal("the prompt is in the log (at debug level)")
	}

	// The same counts reach the collector over OTLP.
	otlptest.AwaitSum(t, r, 30*time.Second, 1, "dsh.inputs", "entry_point", "serve", "outcome", "admitted")
	otlptest.AwaitSum(t, r, 30*time.Second, 1, "dsh.inputs", "entry_point", "serve", "outcome", "refused")
	otlptest.AwaitSum(t, r, 30*time.Second, 1, "dsh.tool.calls", "tool", "clock", "outcome", "ok")
	otlptest.AwaitSum(t, r, 30*time.Second, 1, "dsh.approvals", "answerer", "person")
}

// TestTelemetryOneTraceAcrossHosts: a prompt sent to host b for a session
// host a runs is forwarded over a two-node NATS cluster — a connected to
// one server, b to the other, so the forward and its answer cross the
// route between them — and the whole of it — b's request, the forward,
// a's admission and turn — is one trace.
func TestTelemetryOneTraceAcrossHosts(t *testing.T) {
	nc := natstest.Start(t, 2)
	r := otlptest.Start(t)
	token := "cluster-telemetry-77aa"
	config := func(url string) string {
		path := filepath.Join(t.TempDir(), "config.yaml")
		os.WriteFile(path, []byte(fmt.Sprintf(`plugins:
  - use: llm.scripted
    config: {replies: [{text: "answered on a"}]}
agents:
  - id: main
    provider: scripted
cluster:
  nats: {url: %q}
  lease_ttl: 2s
telemetry:
  enabled: true
  endpoint: %s
  insecure: true
log: {level: warn}
`, url, r.GRPCEndpoint())), 0o644)
		return path
	}
	a := startServe(t, config(nc.URL(0)), "DSH_SERVE_TOKEN="+token, "DSH_CLUSTER__HOST_ID=a", "OTEL_SERVICE_NAME=dsh-a")
	b := startServe(t, config(nc.URL(1)), "DSH_SERVE_TOKEN="+token, "DSH_CLUSTER__HOST_ID=b", "OTEL_SERVICE_NAME=dsh-b")
	// Each host is a client of its own server only, so what b forwards
	// reaches a through the cluster's route.
	for i, host := range []string{"a", "b"} {
		for j := range 2 {
			if got, want := hostConnected(t, nc.Node(j), host), i == j; got != want {
				t.Fatalf("host %s connected to server %d: %v; want %v", host, j, got, want)
			}
		}
	}
	ca, cb := apiClient{t: t, base: a.base, token: token}, apiClient{t: t, base: b.base, token: token}
	if code, out := ca.call("POST", "/v1/sessions", `{"session_id":"s1"}`); code != 201 {
		t.Fatalf("open on a: %d %s", code, out)
	}
	traceparent := "00-" + clientTrace + "-" + clientSpan + "-01"
	if code, out := cb.call("POST", "/v1/sessions/s1/messages", `{"request_id":"x1","content":"hello through b"}`, "traceparent", traceparent); code != 202 {
		t.Fatalf("a message through b: %d %s\n%s", code, out, b.log.String())
	}
	tr := otlptest.Await(t, r, 30*time.Second, "dsh.forward prompt", "dsh.forward prompt", "dsh.forwarded prompt", "dsh.input serve", "dsh.turn", "chat")
	if tr.ID != clientTrace {
		t.Fatalf("the forwarded prompt's trace is %s, not the client's:\n%s", tr.ID, tr.Names())
	}
	fwd, took := tr.Find("dsh.forward prompt"), tr.Find("dsh.forwarded prompt")
	if fwd.Service != "dsh-b" || took.Service != "dsh-a" || took.ParentID != fwd.SpanID {
		t.Fatalf("forward on %s, taken on %s (parent %s, want %s):\n%s", fwd.Service, took.Service, took.ParentID, fwd.SpanID, tr.Names())
	}
	if p := tr.Parent(fwd); p == nil || p.Service != "dsh-b" || !strings.HasPrefix(p.Name, "dsh serve POST") {
		t.Fatalf("the forward is not under b's request:\n%s", tr.Names())
	}
	for _, name := range []string{"dsh.input serve", "dsh.turn", "chat"} {
		s := tr.Find(name)
		if s == nil {
			s = tr.FindPrefix(name)
		}
		if s.Service != "dsh-a" || !tr.Ancestor(s, "dsh.forwarded prompt") {
			t.Fatalf("%s is not a's work under the forward:\n%s", name, tr.Names())
		}
	}
}

// hostConnected reports whether cluster host id holds a client connection
// to s (its membership's connection is named "dsh cluster host <id>").
func hostConnected(t *testing.T, s *server.Server, id string) bool {
	t.Helper()
	cz, err := s.Connz(&server.ConnzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cz.Conns {
		if c.Name == "dsh cluster host "+id {
			return true
		}
	}
	return false
}

// hclogLine is what the tests read of one of hclog's JSON lines.
type hclogLine struct {
	Message   string `json:"@message"`
	RequestID string `json:"request_id"`
	Turn      int    `json:"turn"`
	Verdict   string `json:"verdict"`
	TraceID   string `json:"trace_id"`
	SpanID    string `json:"span_id"`
}

// hclogLines parses the JSON lines of log that hclog wrote (they have an
// @message); other lines are skipped.
func hclogLines(t *testing.T, log string) []hclogLine {
	t.Helper()
	var out []hclogLine
	for _, line := range strings.Split(log, "\n") {
		var l hclogLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Message != "" {
			out = append(out, l)
		}
	}
	return out
}
