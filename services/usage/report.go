package usage

import (
	"fmt"
	"strings"
)

// Counts is the JSON form of Totals.
type Counts struct {
	Steps           int `json:"steps"`
	InputTokens     int `json:"input_tokens"`
	OutputTokens    int `json:"output_tokens"`
	ReasoningTokens int `json:"reasoning_tokens"`
	CacheHitTokens  int `json:"cache_hit_tokens"`
	CacheMissTokens int `json:"cache_miss_tokens"`
	// Cost is absent when a step's model has no price.
	Cost *float64 `json:"cost,omitempty"`
	// UnpricedModels are the models the price table lacks.
	UnpricedModels []string `json:"unpriced_models,omitempty"`
}

// CountsOf returns the JSON form of t.
func CountsOf(t Totals) Counts {
	c := Counts{Steps: t.Steps, InputTokens: t.InputTokens, OutputTokens: t.OutputTokens,
		ReasoningTokens: t.ReasoningTokens, CacheHitTokens: t.CacheHitTokens, CacheMissTokens: t.CacheMissTokens,
		UnpricedModels: append([]string(nil), t.unpriced...)}
	if cost, ok := t.Cost(); ok {
		c.Cost = &cost
	}
	return c
}

// TurnCounts are the counts of one turn.
type TurnCounts struct {
	Turn int `json:"turn"`
	Counts
}

// StepCounts are the counts of one step.
type StepCounts struct {
	Turn     int    `json:"turn"`
	Step     int    `json:"step"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	Counts
}

// Snapshot is what a session used: the JSON shape of dsh's usage reports.
type Snapshot struct {
	Currency string `json:"currency"`
	// Session covers every step the log holds.
	Session Counts `json:"session"`
	// Turn is the latest turn that had a step; Step its latest step.
	Turn *TurnCounts `json:"turn,omitempty"`
	Step *StepCounts `json:"step,omitempty"`
}

// SnapshotOf returns the account's snapshot.
func SnapshotOf(a *Account) Snapshot {
	s := Snapshot{Currency: a.Currency(), Session: CountsOf(a.Session())}
	if n, t := a.Turn(); t.Steps > 0 {
		s.Turn = &TurnCounts{Turn: n, Counts: CountsOf(t)}
	}
	if st, ok := a.Last(); ok {
		c := Counts{Steps: 1, InputTokens: st.Usage.InputTokens, OutputTokens: st.Usage.OutputTokens,
			ReasoningTokens: st.Usage.ReasoningTokens, CacheHitTokens: st.Usage.CacheHitTokens, CacheMissTokens: st.Usage.CacheMissTokens}
		if st.Priced {
			cost := st.Cost
			c.Cost = &cost
		} else if len(a.pricing.Models) > 0 {
			c.UnpricedModels = []string{orDefault(st.Model, st.Provider)}
		}
		s.Step = &StepCounts{Turn: st.Turn, Step: st.Step, Provider: st.Provider, Model: st.Model, Counts: c}
	}
	return s
}

func orDefault(model, provider string) string {
	if model != "" {
		return model
	}
	return "(provider " + provider + " default)"
}

// Line renders counts on one line: "3 steps · 1,234 in (1,000 cached) ·
// 56 out (20 reasoning) · $0.0012".
func Line(c Counts, currency string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s in", thousands(c.InputTokens))
	if c.CacheHitTokens > 0 || c.CacheMissTokens > 0 {
		fmt.Fprintf(&b, " (%s cache hit, %s miss)", thousands(c.CacheHitTokens), thousands(c.CacheMissTokens))
	}
	fmt.Fprintf(&b, " · %s out", thousands(c.OutputTokens))
	if c.ReasoningTokens > 0 {
		fmt.Fprintf(&b, " (%s reasoning)", thousands(c.ReasoningTokens))
	}
	if c.Cost != nil {
		fmt.Fprintf(&b, " · %s", Money(*c.Cost, currency))
	} else if len(c.UnpricedModels) > 0 {
		fmt.Fprintf(&b, " · cost unknown (no price for %s)", strings.Join(c.UnpricedModels, ", "))
	}
	return b.String()
}

// Text renders a snapshot on a few lines, for people.
func Text(s Snapshot) string {
	var b strings.Builder
	if s.Step != nil {
		fmt.Fprintf(&b, "last step (turn %d, step %d): %s\n", s.Step.Turn, s.Step.Step, Line(s.Step.Counts, s.Currency))
	}
	if s.Turn != nil {
		fmt.Fprintf(&b, "turn %d (%d steps): %s\n", s.Turn.Turn, s.Turn.Steps, Line(s.Turn.Counts, s.Currency))
	}
	fmt.Fprintf(&b, "session (%d steps): %s\n", s.Session.Steps, Line(s.Session, s.Currency))
	return b.String()
}

// Money formats an amount: $0.0123 for USD, 0.0123 EUR otherwise. Small
// amounts keep four decimals, so a cheap step does not show as zero.
func Money(v float64, currency string) string {
	digits := 2
	if v < 1 {
		digits = 4
	}
	if currency == "USD" {
		return fmt.Sprintf("$%.*f", digits, v)
	}
	return fmt.Sprintf("%.*f %s", digits, v, currency)
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
