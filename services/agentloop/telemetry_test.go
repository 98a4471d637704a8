package agentloop_test

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/syncbuf"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/usage"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A model request's tokens and its priced cost are counted in dsh.tokens
// and dsh.cost, whatever the trace sampling, priced as /usage prices the
// step: the provider's default model named by DefaultModel, the
// pricing's currency.
func TestTelemetryCountsTokensAndCost(t *testing.T) {
	stop := setupTelemetry(t, 0)
	defer stop()
	pricing := usage.Pricing{Currency: "EUR", Models: map[string]usage.Price{"scripted/m1": {Input: 3, Output: 15}}}
	e := newEnv(t, []scripted.Reply{{Text: "priced", Usage: &llm.Usage{InputTokens: 1000, OutputTokens: 500}}},
		agentloop.Config{Pricing: pricing, DefaultModel: func(p string) string {
			if p == "scripted" {
				return "m1"
			}
			return ""
		}})
	runTurn(t, e.create("a").Agent)

	var tokens, cost []telemetry.Point
	for _, r := range telemetry.ReadMetrics() {
		switch r.Name {
		case "dsh.tokens":
			tokens = r.Points
		case "dsh.cost":
			cost = r.Points
		}
	}
	byType := map[string]int64{}
	for _, p := range tokens {
		v, _ := p.Attrs.Value("gen_ai.token.type")
		byType[v.AsString()] += p.Int
	}
	if byType["input"] != 1000 || byType["output"] != 500 {
		t.Fatalf("dsh.tokens by type = %v; want input 1000, output 500", byType)
	}
	if len(cost) != 1 {
		t.Fatalf("dsh.cost has %d points; want 1", len(cost))
	}
	want := (1000*3.0 + 500*15.0) / 1e6
	if got := cost[0].Float; math.Abs(got-want) > 1e-12 {
		t.Fatalf("dsh.cost = %v; want %v", got, want)
	}
	for k, w := range map[string]string{"agent": "a", "model": "m1", "currency": "EUR"} {
		if v, _ := cost[0].Attrs.Value(attribute.Key(k)); v.AsString() != w {
			t.Fatalf("dsh.cost's %s = %q; want %q", k, v.AsString(), w)
		}
	}
}

// The loop's lines of a turn — its start, a cancel that reaches it from
// another goroutine, its end — carry the trace and span ids of the
// turn's dsh.turn span in hclog's JSON output.
func TestTurnLogLinesCarryTheTurnsSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	on, ratio := true, 1.0
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: &on, Sampling: &ratio}, provider.WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(stdctx.Background())
	var buf syncbuf.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true, Level: hclog.Debug})
	// A slow reply keeps the turn running while it is cancelled.
	e := newEnvLogged(t, scripted.Config{Delay: 50 * time.Millisecond, Replies: []scripted.Reply{{Text: strings.Repeat("slow ", 200)}}},
		agentloop.Config{}, log)
	a := e.create("a").Agent
	if err := a.Followup(user("secret-prompt-9d1e")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(buf.String(), `"turn started"`); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no turn started:\n%s", buf.String())
		}
	}
	a.Cancel(errors.New("stopped by the test"))
	if err := a.WhenIdle(stdctx.Background()); err != nil {
		t.Fatal(err)
	}

	var turn sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "dsh.turn" {
			turn = s
		}
	}
	if turn == nil {
		t.Fatal("no dsh.turn span")
	}
	want := map[string]bool{"turn started": false, "turn cancelled": false, "turn ended": false}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var l struct {
			Message string `json:"@message"`
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if _, ok := want[l.Message]; !ok {
			continue
		}
		if l.TraceID != turn.SpanContext().TraceID().String() || l.SpanID != turn.SpanContext().SpanID().String() {
			t.Fatalf("%q logged with trace_id %q span_id %q; the turn's span is %s", l.Message, l.TraceID, l.SpanID, turn.SpanContext().SpanID())
		}
		want[l.Message] = true
	}
	for msg, seen := range want {
		if !seen {
			t.Fatalf("no %q line:\n%s", msg, buf.String())
		}
	}
	if strings.Contains(buf.String(), "secret-prompt-9d1e") {
		t.Fatalf("the prompt is in the debug log:\n%s", buf.String())
	}
}
