package anthropic_test

import (
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/internal/llmtest"
	"github.com/dsh-go/dsh/services/llm"
)

// textConversation is a text-only conversation with every kind of message
// a provider renders: system, user, assistant with reasoning and tool
// calls, tool results (one failed, one empty), and a user follow-up.
func textConversation() llm.Request {
	temp := 0.5
	return llm.Request{AgentID: "main", System: "be brief", MaxTokens: 100, Temperature: &temp,
		History: llm.NewHistory(
			llm.Message{Role: llm.RoleUser, Content: "time?"},
			llm.Message{Role: llm.RoleAssistant, Reasoning: "clock", ReasoningSignature: "sig", Content: "checking",
				ToolCalls: []llm.ToolCall{{ID: "t1", Name: "clock", Arguments: `{"timezone":"UTC"}`}, {ID: "t2", Name: "weather", Arguments: "{"}, {ID: "t3", Name: "noop", Arguments: "{}"}}},
			llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Content: "noon"},
			llm.Message{Role: llm.RoleTool, ToolCallID: "t2", Content: "bad args", IsError: true},
			llm.Message{Role: llm.RoleTool, ToolCallID: "t3"},
			llm.Message{Role: llm.RoleAssistant, Content: "It is noon."},
			llm.Message{Role: llm.RoleUser, Content: "and tomorrow? \"quoted\" <tag> & ünïcode"},
		),
		Tools: []llm.ToolSpec{{Name: "clock", Description: "tells the time", Parameters: []byte(`{"type":"object","properties":{"timezone":{"type":"string"}}}`)}, {Name: "noop"}},
	}
}

// TestTextOnlyBodyUnchanged: a text-only conversation is sent byte for
// byte as before parts existed (the golden file was written by the
// provider before it learned parts).
func TestTextOnlyBodyUnchanged(t *testing.T) {
	s, rec := llmtest.Serve(t, "testdata", llmtest.Answer{File: "text.sse"})
	if _, _, err := llmtest.Collect(provider(t, s, 1024), textConversation()); err != nil {
		t.Fatal(err)
	}
	llmtest.Golden(t, "testdata/text_request.golden.json", rec.Requests()[0])
}
