package usage_test

import (
	"testing"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/usage"
)

// BenchmarkAccountAdd is the cost of accounting for one step's
// assistant/message, as dsh run and dsh sessions show do for each step
// of the log.
func BenchmarkAccountAdd(b *testing.B) {
	acc := usage.NewAccount(pricing, nil)
	e := step(1, 1, "deepseek", "deepseek-chat", llm.Usage{InputTokens: 1000, CacheHitTokens: 900, CacheMissTokens: 100, OutputTokens: 20})
	other := session.Event{Type: session.ToolResult}
	b.ReportAllocs()
	for b.Loop() {
		acc.Add(e)
		acc.Add(other)
	}
}
