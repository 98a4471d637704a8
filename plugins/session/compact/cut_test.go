package compact_test

import (
	"math"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/session/compact"
	"github.com/dsh-go/dsh/services/llm"
)

// agentic is a history of turns whose steps call two tools each.
func agentic(turns int) llm.History {
	var msgs []llm.Message
	for t := range turns {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: strings.Repeat("u", 40)})
		for s := range 2 {
			id := func(k int) string { return string(rune('a'+t)) + string(rune('0'+s)) + string(rune('0'+k)) }
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id(0), Name: "x"}, {ID: id(1), Name: "y"}}},
				llm.Message{Role: llm.RoleTool, ToolCallID: id(0), Content: strings.Repeat("r", 100)},
				llm.Message{Role: llm.RoleTool, ToolCallID: id(1), Content: strings.Repeat("r", 100)})
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: "done"})
	}
	return llm.NewHistory(msgs...)
}

// TestACutNeverSeparatesCallsFromResults tries every keep budget.
func TestACutNeverSeparatesCallsFromResults(t *testing.T) {
	h := agentic(5)
	for keep := 0; keep <= llm.EstimateRequest(llm.Request{History: h})+10; keep += 7 {
		cut := compact.Cut(h, keep)
		if cut <= 0 || cut >= h.Len() {
			t.Fatalf("keep %d: cut %d of %d", keep, cut, h.Len())
		}
		if m := h.At(cut); m.Role == llm.RoleTool {
			t.Fatalf("keep %d: the kept part starts with a tool result", keep)
		}
		checkPairs(t, h.Slice(cut, h.Len()))
		checkPairs(t, h.Slice(0, cut))
	}
	// With no budget, everything before the last step is summarized.
	if cut := compact.Cut(h, 0); cut != h.Len()-1 {
		t.Fatalf("cut %d with no budget, want %d", cut, h.Len()-1)
	}
}

func TestNothingToCutIsZero(t *testing.T) {
	one := llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "hi"})
	if compact.Cut(one, 0) != 0 {
		t.Fatal("cut a one-message history")
	}
	summarized := llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: compact.SummaryPrefix + "s"}, llm.Message{Role: llm.RoleUser, Content: "q"})
	if compact.Cut(summarized, 0) != 0 {
		t.Fatal("summarized a lone summary again")
	}
	// A step whose calls are all open cannot be cut inside.
	open := llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "q"},
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c"}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "c"})
	if cut := compact.Cut(open, 0); cut != 1 {
		t.Fatalf("cut %d", cut)
	}
}

func TestPruneCutsLongToolResultsOnly(t *testing.T) {
	long := llm.Message{Role: llm.RoleTool, Content: strings.Repeat("é", 100)}
	got := compact.Prune(long, 51)
	if !strings.HasPrefix(got.Content, strings.Repeat("é", 25)+"\n[… 150 more bytes") {
		t.Fatalf("pruned to %q", got.Content)
	}
	user := llm.Message{Role: llm.RoleUser, Content: strings.Repeat("x", 100)}
	if compact.Prune(user, 10).Content != user.Content {
		t.Fatal("pruned a user message")
	}
}

func TestConfigErrorsSayWhatToSet(t *testing.T) {
	for _, c := range []compact.Config{{Threshold: 1.5}, {Threshold: math.NaN()}, {Keep: -0.1}, {Keep: math.NaN()}, {Keep: 0.9}, {Window: -1}, {PruneToolResults: -2}, {SummaryMaxTokens: -1}} {
		err := c.Validate()
		if !errs.HasCode(err, errs.InvalidArgument) || !strings.Contains(err.Error(), "session.compact: ") {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	if err := (compact.Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestFitMovesTheCutEarlierUntilTheSummaryRequestFits(t *testing.T) {
	h := agentic(4)
	cut := compact.Cut(h, 0)
	if got := compact.Fit(h, cut, 1<<30, -1); got != cut {
		t.Fatalf("everything fits, yet Fit moved the cut from %d to %d", cut, got)
	}
	if got := compact.Fit(h, cut, 0, -1); got != 0 {
		t.Fatalf("nothing fits, yet Fit returned %d", got)
	}
	all := llm.EstimateRequest(llm.Request{History: h.Slice(0, cut)})
	got := compact.Fit(h, cut, all/2, -1)
	if got <= 0 || got >= cut || llm.EstimateRequest(llm.Request{History: h.Slice(0, got)}) > all/2 {
		t.Fatalf("half the room: cut %d of %d", got, cut)
	}
	checkPairs(t, h.Slice(0, got))
	// Pruned tool results count at their pruned size.
	if pruned := compact.Fit(h, cut, all/2, 10); pruned <= got {
		t.Fatalf("pruning did not make room: %d, unpruned %d", pruned, got)
	}
}
