package openai_test

import (
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/openai"
)

func TestContextWindowDefaultsAndConfig(t *testing.T) {
	key := func(string) string { return "k" }
	ds, _ := openai.NewDeepSeek(openai.Config{}, key)
	oa, _ := openai.NewOpenAI(openai.Config{Common: httpx.Common{ContextWindow: 400000}}, key)
	if ds.ContextWindow("deepseek-chat") != 128000 || oa.ContextWindow("gpt-5") != 400000 {
		t.Fatalf("windows %d and %d", ds.ContextWindow(""), oa.ContextWindow(""))
	}
	if _, err := openai.NewOpenAI(openai.Config{Common: httpx.Common{ContextWindow: -1}}, key); !errs.HasCode(err, errs.InvalidArgument) || err == nil {
		t.Fatalf("a negative window: %v", err)
	}
}
