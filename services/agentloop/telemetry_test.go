package agentloop_test

import (
	"math"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/usage"
	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/attribute"
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
