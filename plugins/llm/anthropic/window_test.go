package anthropic_test

import (
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/anthropic"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
)

func TestContextWindowDefaultsAndConfig(t *testing.T) {
	key := func(string) string { return "k" }
	p, _ := anthropic.New(anthropic.Config{}, key)
	q, _ := anthropic.New(anthropic.Config{Common: httpx.Common{ContextWindow: 1000000}}, key)
	if p.ContextWindow("") != 200000 || q.ContextWindow("") != 1000000 {
		t.Fatalf("windows %d and %d", p.ContextWindow(""), q.ContextWindow(""))
	}
}
