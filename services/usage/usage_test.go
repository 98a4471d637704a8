package usage_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/usage"
)

func f(v float64) *float64 { return &v }

func step(turn, n int, provider, model string, u llm.Usage) session.Event {
	return session.Event{Type: session.AssistantMessage, Turn: turn, Step: n, Provider: provider, Model: model, Usage: &u}
}

var pricing = usage.Pricing{Models: map[string]usage.Price{
	"deepseek-chat":      {Input: 0.27, CacheHit: f(0.07), Output: 1.10},
	"openai/gpt-4o-mini": {Input: 0.15, Output: 0.60},
	"local":              {},
}}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestCostWithCachePrices(t *testing.T) {
	acc := usage.NewAccount(pricing, nil)
	acc.Add(session.Event{Type: session.UserMessage, Turn: 1})
	acc.Add(step(1, 1, "deepseek", "deepseek-chat", llm.Usage{InputTokens: 1_000_000, CacheHitTokens: 800_000, CacheMissTokens: 200_000, OutputTokens: 100_000, ReasoningTokens: 40_000}))
	acc.Add(step(1, 2, "deepseek", "deepseek-chat", llm.Usage{InputTokens: 2_000_000, CacheHitTokens: 2_000_000, OutputTokens: 0}))
	acc.Add(step(2, 1, "openai", "gpt-4o-mini", llm.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}))

	s := acc.Session()
	want := (200_000*0.27+800_000*0.07+100_000*1.10)/1e6 + 2*0.07 + 0.15 + 0.60
	if cost, ok := s.Cost(); !ok || !near(cost, want) {
		t.Fatalf("session cost %v %v, want %v", cost, ok, want)
	}
	if s.Steps != 3 || s.InputTokens != 4_000_000 || s.CacheHitTokens != 2_800_000 || s.ReasoningTokens != 40_000 {
		t.Fatalf("session totals %+v", s)
	}
	// gpt-4o-mini reported no cache split: its input counts as misses.
	if s.CacheMissTokens != 1_200_000 {
		t.Fatalf("cache misses %d", s.CacheMissTokens)
	}
	n, turn := acc.Turn()
	if n != 2 || turn.Steps != 1 {
		t.Fatalf("turn %d %+v", n, turn)
	}
	if cost, ok := turn.Cost(); !ok || !near(cost, 0.75) {
		t.Fatalf("turn cost %v", cost)
	}
	last, ok := acc.Last()
	if !ok || last.Turn != 2 || last.Step != 1 || !last.Priced {
		t.Fatalf("last %+v", last)
	}
}

func TestUnknownModelShowsTokensWithoutCost(t *testing.T) {
	acc := usage.NewAccount(pricing, nil)
	acc.Add(step(1, 1, "deepseek", "deepseek-chat", llm.Usage{InputTokens: 10, OutputTokens: 5}))
	acc.Add(step(1, 2, "anthropic", "claude-x", llm.Usage{InputTokens: 100, OutputTokens: 50}))
	s := acc.Session()
	if _, ok := s.Cost(); ok {
		t.Fatal("a session with an unpriced step has a cost")
	}
	if s.InputTokens != 110 || s.OutputTokens != 55 {
		t.Fatalf("%+v", s)
	}
	snap := usage.SnapshotOf(acc)
	if snap.Session.Cost != nil || len(snap.Session.UnpricedModels) != 1 || snap.Session.UnpricedModels[0] != "claude-x" {
		t.Fatalf("%+v", snap.Session)
	}
	line := usage.Text(snap)
	if !strings.Contains(line, "110 in") || !strings.Contains(line, "cost unknown (no price for claude-x)") || strings.Contains(line, "$") {
		t.Fatalf("text:\n%s", line)
	}
}

func TestDefaultModelAndProviderQualifiedPrice(t *testing.T) {
	acc := usage.NewAccount(pricing, func(provider string) string {
		if provider == "openai" {
			return "gpt-4o-mini"
		}
		return ""
	})
	// An older log: no model recorded; the provider's default prices it.
	acc.Add(step(1, 1, "openai", "", llm.Usage{InputTokens: 1_000_000}))
	if cost, ok := acc.Session().Cost(); !ok || !near(cost, 0.15) {
		t.Fatalf("cost %v %v", cost, ok)
	}
	// provider/model prices a model only at that provider.
	acc.Add(step(1, 2, "ollama", "gpt-4o-mini", llm.Usage{InputTokens: 1}))
	if _, ok := acc.Session().Cost(); ok {
		t.Fatal("gpt-4o-mini at ollama was priced by openai's price")
	}
}

func TestZeroPriceIsAFreeModel(t *testing.T) {
	acc := usage.NewAccount(pricing, nil)
	acc.Add(step(1, 1, "ollama", "local", llm.Usage{InputTokens: 1000, OutputTokens: 10}))
	snap := usage.SnapshotOf(acc)
	if snap.Session.Cost == nil || *snap.Session.Cost != 0 || !strings.Contains(usage.Text(snap), "$0.0000") {
		t.Fatalf("%s", usage.Text(snap))
	}
}

func TestSnapshotJSON(t *testing.T) {
	acc := usage.NewAccount(pricing, nil)
	acc.Add(step(3, 2, "deepseek", "deepseek-chat", llm.Usage{InputTokens: 10, CacheHitTokens: 8, CacheMissTokens: 2, OutputTokens: 5, ReasoningTokens: 1}))
	b, _ := json.Marshal(usage.SnapshotOf(acc))
	for _, want := range []string{`"currency":"USD"`, `"session":{"steps":1,"input_tokens":10,"output_tokens":5,"reasoning_tokens":1,"cache_hit_tokens":8,"cache_miss_tokens":2,"cost":`,
		`"turn":{"turn":3,"steps":1`, `"step":{"turn":3,"step":2,"provider":"deepseek","model":"deepseek-chat","steps":1`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("%s\nlacks %s", b, want)
		}
	}
}

func TestCheck(t *testing.T) {
	p := usage.Pricing{Currency: " EUR", Models: map[string]usage.Price{"a": {Input: -1}, "b": {Input: 1, Output: 2}}}
	probs := p.Check()
	if len(probs) != 2 || probs[0].Key != "currency" || probs[1].Key != "models.a" {
		t.Fatalf("%+v", probs)
	}
	if m := usage.Money(1.5, "EUR"); m != "1.50 EUR" {
		t.Fatal(m)
	}
}

func TestNoPriceTableShowsNoCostAndBlamesNoModel(t *testing.T) {
	acc := usage.NewAccount(usage.Pricing{}, nil)
	acc.Add(step(1, 1, "scripted", "", llm.Usage{InputTokens: 7}))
	snap := usage.SnapshotOf(acc)
	if snap.Session.Cost != nil || snap.Session.UnpricedModels != nil || snap.Step.UnpricedModels != nil {
		t.Fatalf("%+v", snap)
	}
	if text := usage.Text(snap); strings.Contains(text, "cost") || !strings.Contains(text, "7 in") {
		t.Fatal(text)
	}
}

// A compaction's summary request is paid for: its tokens and cost add to
// the turn and the session as one more model request, and it is not the
// last step.
func TestACompactionsSummaryRequestCounts(t *testing.T) {
	acc := usage.NewAccount(pricing, nil)
	acc.Add(step(1, 1, "deepseek", "deepseek-chat", llm.Usage{InputTokens: 1_000_000, CacheMissTokens: 1_000_000}))
	u := llm.Usage{InputTokens: 1_000_000, CacheMissTokens: 1_000_000, OutputTokens: 1_000_000}
	acc.Add(session.Event{Type: session.Compacted, Turn: 1, Step: 2, Provider: "deepseek", Model: "deepseek-chat", Usage: &u})
	s := acc.Session()
	if s.Steps != 2 || s.InputTokens != 2_000_000 || s.OutputTokens != 1_000_000 {
		t.Fatalf("session totals %+v", s)
	}
	if cost, ok := s.Cost(); !ok || !near(cost, 0.27+0.27+1.10) {
		t.Fatalf("session cost %v %v", cost, ok)
	}
	if last, _ := acc.Last(); last.Step != 1 {
		t.Fatalf("the compaction became the last step: %+v", last)
	}
}
