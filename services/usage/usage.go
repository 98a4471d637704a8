// Package usage accounts for the tokens and the cost of a session: per
// step, per turn and for the whole session, from the usage each
// assistant/message event of the session log records.
//
// Nothing is stored beyond the log: an Account is fed the log's events (a
// resumed session's replayed log first, then each new event), so a resumed
// session keeps its totals. Cost comes from a price table (Pricing, the
// config's pricing: key): a step whose model has no price leaves the cost
// unknown, never wrong; its tokens still count.
package usage

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// Price is what a model costs, in the table's currency per million
// tokens.
type Price struct {
	// Input is the price of input tokens not served from the provider's
	// prompt cache (cache misses, cache writes included).
	Input float64 `koanf:"input" json:"input"`
	// CacheHit is the price of input tokens read from the prompt cache;
	// unset means Input.
	CacheHit *float64 `koanf:"cache_hit" json:"cache_hit,omitempty"`
	// Output is the price of output tokens, reasoning tokens included
	// (providers count them as output).
	Output float64 `koanf:"output" json:"output"`
}

// Cost returns what u costs at p.
func (p Price) Cost(u llm.Usage) float64 {
	hit := p.Input
	if p.CacheHit != nil {
		hit = *p.CacheHit
	}
	u = Normalize(u)
	return (float64(u.CacheMissTokens)*p.Input + float64(u.CacheHitTokens)*hit + float64(u.OutputTokens)*p.Output) / 1e6
}

// Pricing is the price table: the config's pricing: key.
type Pricing struct {
	// Currency names the unit of the prices (default USD).
	Currency string `koanf:"currency" json:"currency,omitempty"`
	// Models maps a model name, or provider/model for a model of one
	// provider only, to its price. A model priced at zero (a local one)
	// shows a cost of zero; a model missing here shows no cost.
	Models map[string]Price `koanf:"models" json:"models,omitempty"`
}

// Lookup returns the price of model at provider: "provider/model" first,
// then "model".
func (p Pricing) Lookup(provider, model string) (Price, bool) {
	if model == "" {
		return Price{}, false
	}
	if provider != "" {
		if pr, ok := p.Models[provider+"/"+model]; ok {
			return pr, true
		}
	}
	pr, ok := p.Models[model]
	return pr, ok
}

// PricedConfig is implemented by a plugin config (a pointer to it) that
// prices usage with the config's pricing: key, as the budget plugin's
// cost limits do: the config loader hands it the table after decoding the
// entry and before its Validate, so a check can say when a price is
// missing.
type PricedConfig interface {
	UsePricing(Pricing)
}

// CurrencyName returns the currency, USD when unset.
func (p Pricing) CurrencyName() string {
	if p.Currency == "" {
		return "USD"
	}
	return p.Currency
}

// Problem is one mistake in a price table: the key path under pricing
// and what is wrong there.
type Problem struct {
	Key, Message string
}

// Check returns the mistakes of the table, in key order.
func (p Pricing) Check() []Problem {
	var out []Problem
	if c := p.Currency; c != "" && strings.TrimSpace(c) != c {
		out = append(out, Problem{"currency", fmt.Sprintf("currency %q has surrounding spaces", c)})
	}
	names := make([]string, 0, len(p.Models))
	for name := range p.Models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pr := p.Models[name]
		at := "models." + name
		if strings.TrimSpace(name) == "" {
			out = append(out, Problem{"models", "a model name is empty"})
			continue
		}
		bad := func(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }
		if bad(pr.Input) || bad(pr.Output) || (pr.CacheHit != nil && bad(*pr.CacheHit)) {
			out = append(out, Problem{at, "prices must be finite and not negative; they are per million tokens, e.g. input: 0.27"})
		}
	}
	return out
}

// Normalize completes a provider's usage: input tokens not reported as
// cache hits count as cache misses.
func Normalize(u llm.Usage) llm.Usage {
	if u.CacheHitTokens+u.CacheMissTokens < u.InputTokens {
		u.CacheMissTokens = u.InputTokens - u.CacheHitTokens
	}
	return u
}

// Totals are the tokens and the cost of some steps.
type Totals struct {
	Steps int
	llm.Usage
	// cost sums the priced steps; unpriced names the models of the others.
	cost     float64
	unpriced []string
	noCost   bool
}

// Cost returns the cost of the steps, and false when a step's model has
// no price (or there were no steps).
func (t Totals) Cost() (float64, bool) {
	return t.cost, t.Steps > 0 && len(t.unpriced) == 0 && !t.noCost
}

// Unpriced returns the models the price table has no price for; without a
// table, none.
func (t Totals) Unpriced() []string { return t.unpriced }

func (t *Totals) add(u llm.Usage, cost float64, priced, noTable bool, model string) {
	t.Steps++
	t.Usage = t.Usage.Add(u)
	switch {
	case priced:
		t.cost += cost
	case noTable:
		// Without a price table no cost is known, and no model is to
		// blame for it.
		t.noCost = true
	case !slices.Contains(t.unpriced, model):
		t.unpriced = append(t.unpriced, model)
	}
}

// Step is the usage of one step.
type Step struct {
	Turn, Step      int
	Provider, Model string
	Usage           llm.Usage
	Cost            float64
	Priced          bool
}

// Account keeps a session's totals. It is not safe for concurrent use;
// Tracker is.
type Account struct {
	pricing Pricing
	// model names the model of steps recorded without one (logs written
	// before events named it, or agents that left the choice to their
	// provider): it maps a provider to its configured model.
	model func(provider string) string

	session, turn Totals
	turnNo        int
	last          Step
	hasLast       bool
}

// NewAccount returns an empty account pricing steps with pricing;
// defaultModel (may be nil) names the model of steps recorded without one.
func NewAccount(pricing Pricing, defaultModel func(provider string) string) *Account {
	return &Account{pricing: pricing, model: defaultModel}
}

// Counted reports whether an event of the session log carries usage the
// account counts: a step's assistant/message, and history/compacted,
// whose summary request is paid for like a step.
func Counted(e session.Event) bool {
	return e.Type == session.AssistantMessage || e.Type == session.Compacted
}

// Add accounts for one event of the session log; only the events Counted
// accepts change the totals. A compaction adds to the turn and the session
// but is not the last step.
func (a *Account) Add(e session.Event) {
	if !Counted(e) {
		return
	}
	var u llm.Usage
	if e.Usage != nil {
		u = Normalize(*e.Usage)
	}
	model := e.Model
	if model == "" && a.model != nil {
		model = a.model(e.Provider)
	}
	pr, priced := a.pricing.Lookup(e.Provider, model)
	var cost float64
	if priced {
		cost = pr.Cost(u)
	}
	name := model
	if name == "" {
		name = "(provider " + e.Provider + " default)"
	}
	if e.Turn != a.turnNo {
		a.turn, a.turnNo = Totals{}, e.Turn
	}
	noTable := len(a.pricing.Models) == 0
	a.turn.add(u, cost, priced, noTable, name)
	a.session.add(u, cost, priced, noTable, name)
	if e.Type == session.Compacted {
		return
	}
	a.last = Step{Turn: e.Turn, Step: e.Step, Provider: e.Provider, Model: model, Usage: u, Cost: cost, Priced: priced}
	a.hasLast = true
}

// AddAll accounts for a log.
func (a *Account) AddAll(events []session.Event) {
	for _, e := range events {
		a.Add(e)
	}
}

// Session returns the totals of the whole session.
func (a *Account) Session() Totals { return a.session }

// Turn returns the totals of the latest turn that had a step, and its
// number (0 when none had).
func (a *Account) Turn() (int, Totals) { return a.turnNo, a.turn }

// Last returns the latest step, false when there was none.
func (a *Account) Last() (Step, bool) { return a.last, a.hasLast }

// Currency returns the currency of the prices.
func (a *Account) Currency() string { return a.pricing.CurrencyName() }
