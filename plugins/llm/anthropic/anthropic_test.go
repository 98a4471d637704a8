package anthropic_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/anthropic"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/internal/llmtest"
	"github.com/dsh-go/dsh/services/llm"
)

func provider(t *testing.T, s *httptest.Server, budget int) *anthropic.Provider {
	t.Helper()
	p, err := anthropic.New(anthropic.Config{
		Common:         httpx.Common{BaseURL: s.URL, APIKeyEnv: "TEST_KEY", Model: "claude-test", RetryBackoff: time.Millisecond},
		ThinkingBudget: budget,
	}, func(k string) string { return map[string]string{"TEST_KEY": "sk-ant"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func hello() llm.Request {
	return llm.Request{AgentID: "main", History: llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "hi"})}
}

func TestThinkingTextAndToolUse(t *testing.T) {
	s, rec := llmtest.Serve(t, "testdata", llmtest.Answer{File: "thinking_tool.sse"})
	a, chunks, err := llmtest.Collect(provider(t, s, 2048), hello())
	if err != nil {
		t.Fatal(err)
	}
	m := a.Message()
	if m.Reasoning != "The user asks for the time. Call the clock." || m.ReasoningSignature != "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxsig==" || m.Content != "Let me check." {
		t.Fatalf("message %+v", m)
	}
	if len(m.ToolCalls) != 2 || m.ToolCalls[0] != (llm.ToolCall{ID: "toolu_01A", Name: "clock", Arguments: `{"timezone": "UTC"}`}) || m.ToolCalls[1].Arguments != `{"city":"Oslo"}` {
		t.Fatalf("tool calls %+v", m.ToolCalls)
	}
	if f, _ := a.Finish(); f != llm.FinishToolCalls {
		t.Fatalf("finish %q", f)
	}
	if u := a.Usage(); u.InputTokens != 250 || u.CacheHitTokens != 200 || u.CacheMissTokens != 50 || u.OutputTokens != 89 {
		t.Fatalf("usage %+v", u)
	}
	if chunks[len(chunks)-1].Kind != llm.ChunkFinish {
		t.Fatal("the finish must come last")
	}
	h := rec.Headers()[0]
	if h.Get("x-api-key") != "sk-ant" || h.Get("anthropic-version") != anthropic.APIVersion {
		t.Fatalf("headers %v", h)
	}
	var body map[string]any
	json.Unmarshal(rec.Requests()[0], &body)
	if body["max_tokens"] != float64(anthropic.DefaultMaxTokens) || body["thinking"].(map[string]any)["budget_tokens"] != float64(2048) || body["stream"] != true {
		t.Fatalf("request %s", rec.Requests()[0])
	}
}

func TestStopReasons(t *testing.T) {
	for file, want := range map[string]llm.FinishReason{
		"text.sse": llm.FinishStop, "stop_max_tokens.sse": llm.FinishMaxTokens,
		"stop_refusal.sse": llm.FinishError, "stop_pause_turn.sse": llm.FinishError,
	} {
		s, _ := llmtest.Serve(t, "testdata", llmtest.Answer{File: file})
		a, _, err := llmtest.Collect(provider(t, s, 0), hello())
		if err != nil {
			t.Fatal(err)
		}
		f, text := a.Finish()
		if f != want || a.Message().Content != "Hello!" {
			t.Fatalf("%s: %q %q", file, f, a.Message().Content)
		}
		if file == "stop_pause_turn.sse" && !strings.Contains(text, "pause_turn") {
			t.Fatalf("raw stop reason lost: %q", text)
		}
		// A refusal is named by its code, which ACP answers as refusal;
		// another error is not.
		if refused := strings.HasPrefix(text, string(llm.Refused)); refused != (file == "stop_refusal.sse") {
			t.Fatalf("%s: %q", file, text)
		}
	}
}

func TestBrokenStreams(t *testing.T) {
	for file, reason := range map[string]string{"cut.sse": anthropic.ReasonTruncated, "overloaded.sse": anthropic.ReasonAPIError} {
		s, _ := llmtest.Serve(t, "testdata", llmtest.Answer{File: file})
		_, _, err := llmtest.Collect(provider(t, s, 0), hello())
		if !errs.Has(err, llm.ProviderFailed, reason) || !strings.Contains(err.Error(), "anthropic") {
			t.Fatalf("%s: %v", file, err)
		}
	}
	s, _ := llmtest.Serve(t, "testdata", llmtest.Answer{Status: 401, Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`})
	_, _, err := llmtest.Collect(provider(t, s, 0), hello())
	if !errs.Has(err, llm.ProviderFailed, httpx.ReasonUnauthorized) || !strings.Contains(err.Error(), "TEST_KEY") || !strings.Contains(err.Error(), "invalid x-api-key") {
		t.Fatalf("401: %v", err)
	}
}

func TestRequestShape(t *testing.T) {
	s, rec := llmtest.Serve(t, "testdata", llmtest.Answer{File: "text.sse"})
	history := llm.NewHistory(
		llm.Message{Role: llm.RoleUser, Content: "time?"},
		llm.Message{Role: llm.RoleAssistant, Reasoning: "clock", ReasoningSignature: "sig", Content: "checking", ToolCalls: []llm.ToolCall{{ID: "t1", Name: "clock", Arguments: `{"timezone":"UTC"}`}, {ID: "t2", Name: "weather", Arguments: "{"}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Content: "noon"},
		llm.Message{Role: llm.RoleTool, ToolCallID: "t2", Content: "bad args", IsError: true},
		llm.Message{Role: llm.RoleUser, Content: "and tomorrow?"},
	)
	if _, _, err := llmtest.Collect(provider(t, s, 0), llm.Request{System: "be brief", History: history, Tools: []llm.ToolSpec{{Name: "clock"}}}); err != nil {
		t.Fatal(err)
	}
	var body struct {
		System   string `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
		Tools []map[string]any `json:"tools"`
	}
	json.Unmarshal(rec.Requests()[0], &body)
	if body.System != "be brief" || len(body.Messages) != 3 {
		t.Fatalf("roles must alternate: %s", rec.Requests()[0])
	}
	asst := body.Messages[1].Content
	if asst[0]["type"] != "thinking" || asst[0]["signature"] != "sig" || asst[1]["type"] != "text" || asst[2]["type"] != "tool_use" || asst[3]["input"] == nil {
		t.Fatalf("assistant blocks %v", asst)
	}
	results := body.Messages[2].Content
	if len(results) != 3 || results[0]["type"] != "tool_result" || results[1]["is_error"] != true || results[2]["text"] != "and tomorrow?" {
		t.Fatalf("tool results %v", results)
	}
	if body.Tools[0]["input_schema"] == nil {
		t.Fatalf("tools %v", body.Tools)
	}
}

// TestCumulativeUsageInMessageDelta: a message_delta that repeats the
// input counts (newer API versions, server-side tools) replaces those of
// message_start; one with output_tokens only keeps them.
func TestCumulativeUsageInMessageDelta(t *testing.T) {
	s, _ := llmtest.Serve(t, "testdata", llmtest.Answer{File: "delta_usage.sse"})
	a, _, err := llmtest.Collect(provider(t, s, 2048), hello())
	if err != nil {
		t.Fatal(err)
	}
	if u := a.Usage(); u.InputTokens != 365 || u.CacheHitTokens != 300 || u.CacheMissTokens != 65 || u.OutputTokens != 89 || u.ReasoningTokens != 0 {
		t.Fatalf("usage %+v", u)
	}
}
