package llm_test

import (
	"testing"

	"github.com/dsh-go/dsh/services/llm"
)

func TestEstimatesGrowWithTheText(t *testing.T) {
	short := llm.Request{System: "be brief", History: llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "hi"})}
	long := short
	long.History = short.History.Append(llm.Message{Role: llm.RoleAssistant, Content: string(make([]byte, 4000)),
		ToolCalls: []llm.ToolCall{{ID: "c", Name: "clock", Arguments: "{}"}}})
	a, b := llm.EstimateRequest(short), llm.EstimateRequest(long)
	if a <= 0 || b-a < 1000 || b-a > 1100 {
		t.Fatalf("estimates %d and %d: 4000 more bytes should add about 1000 tokens", a, b)
	}
	if llm.EstimateText("abcd") != 1 || llm.EstimateText("abcde") != 2 {
		t.Fatal("EstimateText rounds wrong")
	}
}
