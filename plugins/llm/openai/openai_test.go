package openai_test

import (
	stdctx "context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/internal/llmtest"
	"github.com/dsh-go/dsh/plugins/llm/openai"
	"github.com/dsh-go/dsh/services/llm"
)

type answer = llmtest.Answer

func server(t *testing.T, answers ...answer) (*httptest.Server, *llmtest.Replay) {
	return llmtest.Serve(t, "testdata", answers...)
}

func provider(t *testing.T, s *httptest.Server, deepseek bool) *openai.Provider {
	t.Helper()
	cfg := openai.Config{Common: httpx.Common{BaseURL: s.URL, APIKeyEnv: "TEST_KEY", Model: "m", RetryBackoff: time.Millisecond}}
	env := func(k string) string {
		if k == "TEST_KEY" {
			return "sk-test"
		}
		return ""
	}
	var p *openai.Provider
	var err error
	if deepseek {
		p, err = openai.NewDeepSeek(cfg, env)
	} else {
		p, err = openai.NewOpenAI(cfg, env)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func collect(t *testing.T, p *openai.Provider, req llm.Request) (*llm.Assembler, []llm.Chunk, error) {
	return llmtest.Collect(p, req)
}

func hello() llm.Request {
	return llm.Request{AgentID: "main", History: llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "hi"})}
}

func TestTextStream(t *testing.T) {
	s, rec := server(t, answer{File: "text.sse"})
	a, chunks, err := collect(t, provider(t, s, false), hello())
	if err != nil {
		t.Fatal(err)
	}
	if m := a.Message(); m.Content != "Hello, world" {
		t.Fatalf("content %q", m.Content)
	}
	if f, _ := a.Finish(); f != llm.FinishStop {
		t.Fatalf("finish %q", f)
	}
	if u := a.Usage(); u.InputTokens != 12 || u.OutputTokens != 4 || u.CacheHitTokens != 8 || u.CacheMissTokens != 4 {
		t.Fatalf("usage %+v", u)
	}
	if last := chunks[len(chunks)-1]; last.Kind != llm.ChunkFinish || chunks[len(chunks)-2].Kind != llm.ChunkUsage {
		t.Fatal("usage must come before the finish, which ends the stream")
	}
	var body map[string]any
	json.Unmarshal(rec.Requests()[0], &body)
	if body["stream"] != true || body["model"] != "m" || body["stream_options"].(map[string]any)["include_usage"] != true {
		t.Fatalf("request %s", rec.Requests()[0])
	}
	if rec.Headers()[0].Get("Authorization") != "Bearer sk-test" {
		t.Fatal("no API key sent")
	}
}

func TestParallelToolCallsJoinedByIndex(t *testing.T) {
	s, _ := server(t, answer{File: "parallel_tools.sse"})
	a, _, err := collect(t, provider(t, s, false), hello())
	if err != nil {
		t.Fatal(err)
	}
	m := a.Message()
	if len(m.ToolCalls) != 2 || m.ToolCalls[0] != (llm.ToolCall{ID: "call_weather", Name: "weather", Arguments: `{"city": "Paris"}`}) ||
		m.ToolCalls[1] != (llm.ToolCall{ID: "call_clock", Name: "clock", Arguments: "{}"}) {
		t.Fatalf("tool calls %+v", m.ToolCalls)
	}
	if f, _ := a.Finish(); f != llm.FinishToolCalls {
		t.Fatalf("finish %q", f)
	}
}

func TestDeepSeekReasoningAndCacheUsage(t *testing.T) {
	s, _ := server(t, answer{File: "deepseek_reasoning_tool.sse"})
	a, _, err := collect(t, provider(t, s, true), hello())
	if err != nil {
		t.Fatal(err)
	}
	m := a.Message()
	if m.Reasoning != "The user wants the time. I will call the clock." || len(m.ToolCalls) != 1 || m.ToolCalls[0].Arguments != `{"timezone":"UTC"}` {
		t.Fatalf("message %+v", m)
	}
	if u := a.Usage(); u.CacheHitTokens != 64 || u.CacheMissTokens != 56 || u.ReasoningTokens != 12 {
		t.Fatalf("usage %+v", u)
	}
}

func TestUsageChunkWithNullOrMissingChoices(t *testing.T) {
	s, _ := server(t, answer{File: "vllm_usage.sse"})
	a, _, err := collect(t, provider(t, s, false), hello())
	// No cache split reported: the input counts as cache misses.
	if u := a.Usage(); err != nil || a.Message().Content != "ok" || u.InputTokens != 5 || u.CacheMissTokens != 5 || u.CacheHitTokens != 0 || u.OutputTokens != 1 {
		t.Fatalf("%v %+v %+v", err, a.Message(), a.Usage())
	}
}

func TestFinishReasons(t *testing.T) {
	for file, want := range map[string]llm.FinishReason{"length.sse": llm.FinishMaxTokens, "filtered.sse": llm.FinishError, "unknown_finish.sse": llm.FinishError} {
		s, _ := server(t, answer{File: file})
		a, _, err := collect(t, provider(t, s, false), hello())
		if err != nil {
			t.Fatal(err)
		}
		f, text := a.Finish()
		if f != want {
			t.Fatalf("%s: finish %q", file, f)
		}
		if file == "unknown_finish.sse" && !strings.Contains(text, "weird_new_reason") {
			t.Fatalf("the raw finish_reason must be kept: %q", text)
		}
		if file == "filtered.sse" && !strings.Contains(text, "content_filter") {
			t.Fatalf("filtered: %q", text)
		}
		if refused := strings.HasPrefix(text, string(llm.Refused)); refused != (file == "filtered.sse") {
			t.Fatalf("%s: a refusal is named by its code, nothing else is: %q", file, text)
		}
	}
}

func TestBrokenStreamsAreErrors(t *testing.T) {
	cases := map[string]struct{ reason, text string }{
		"no_done.sse":   {openai.ReasonTruncated, "before [DONE]"},
		"bad_json.sse":  {openai.ReasonBadChunk, "line 3"},
		"error_mid.sse": {openai.ReasonAPIError, "server had an error"},
	}
	for file, want := range cases {
		s, rec := server(t, answer{File: file}, answer{File: "text.sse"})
		_, _, err := collect(t, provider(t, s, false), hello())
		if !errs.Has(err, llm.ProviderFailed, want.reason) || !strings.Contains(err.Error(), want.text) || !strings.Contains(err.Error(), "openai") {
			t.Fatalf("%s: %v", file, err)
		}
		if len(rec.Requests()) != 1 {
			t.Fatalf("%s: an error after streaming began must not be retried", file)
		}
	}
}

func TestRetriesHonourRetryAfter(t *testing.T) {
	s, rec := server(t,
		answer{Status: 429, Header: map[string]string{"Retry-After": "0"}, Body: `{"error":{"message":"slow down"}}`},
		answer{Status: 503, Body: "overloaded"},
		answer{File: "text.sse"})
	a, _, err := collect(t, provider(t, s, false), hello())
	if err != nil || a.Message().Content != "Hello, world" || len(rec.Requests()) != 3 {
		t.Fatalf("%v, %d requests", err, len(rec.Requests()))
	}
	// Out of retries: the last failure is reported.
	s2, rec2 := server(t, answer{Status: 500, Body: `{"error":{"message":"boom"}}`})
	_, _, err = collect(t, provider(t, s2, false), hello())
	if !errs.Has(err, llm.ProviderFailed, httpx.ReasonServerError) || !strings.Contains(err.Error(), "boom") || len(rec2.Requests()) != 4 {
		t.Fatalf("%v after %d requests", err, len(rec2.Requests()))
	}
}

func TestUnauthorizedNamesTheVariable(t *testing.T) {
	s, rec := server(t, answer{Status: 401, Body: `{"error":{"message":"Authentication Fails (no such user)","type":"authentication_error"}}`})
	_, _, err := collect(t, provider(t, s, true), hello())
	if !errs.Has(err, llm.ProviderFailed, httpx.ReasonUnauthorized) || !strings.Contains(err.Error(), "set TEST_KEY") || len(rec.Requests()) != 1 {
		t.Fatalf("%v", err)
	}
	if strings.Contains(err.Error(), "sk-test") {
		t.Fatal("the key leaked into the error")
	}
	if _, err := openai.NewDeepSeek(openai.Config{}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "DEEPSEEK_API_KEY") {
		t.Fatalf("missing key: %v", err)
	}
}

func TestCancelClosesTheStream(t *testing.T) {
	release := make(chan struct{})
	var closed atomic.Bool
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			closed.Store(true)
		case <-release:
		}
	}))
	defer s.Close()
	defer close(release)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	st, err := provider(t, s, false).Stream(ctx, hello())
	if err != nil {
		t.Fatal(err)
	}
	if c, err := st.Recv(); err != nil || c.Text != "a" {
		t.Fatalf("%+v %v", c, err)
	}
	cancel()
	if _, err := st.Recv(); err == nil {
		t.Fatal("a cancelled stream must fail")
	}
	st.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !closed.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if !closed.Load() {
		t.Fatal("the server never saw the stream close")
	}
}

func TestRequestCarriesToolResultsAndDeepSeekReasoning(t *testing.T) {
	history := llm.NewHistory(
		llm.Message{Role: llm.RoleUser, Content: "time?"},
		llm.Message{Role: llm.RoleAssistant, Reasoning: "call the clock", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "clock", Arguments: "{}"}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Content: "noon"},
	)
	for _, deepseek := range []bool{true, false} {
		s, rec := server(t, answer{File: "text.sse"})
		req := llm.Request{AgentID: "a", System: "be brief", History: history, Tools: []llm.ToolSpec{{Name: "clock", Description: "time"}}}
		if _, _, err := collect(t, provider(t, s, deepseek), req); err != nil {
			t.Fatal(err)
		}
		var body struct {
			Messages []map[string]any `json:"messages"`
			Tools    []map[string]any `json:"tools"`
		}
		json.Unmarshal(rec.Requests()[0], &body)
		if len(body.Messages) != 4 || body.Messages[0]["role"] != "system" || body.Messages[3]["tool_call_id"] != "c1" || body.Messages[3]["content"] != "noon" {
			t.Fatalf("messages %s", rec.Requests()[0])
		}
		_, sent := body.Messages[2]["reasoning_content"]
		if sent != deepseek {
			t.Fatalf("deepseek=%v: reasoning_content sent=%v", deepseek, sent)
		}
		if body.Messages[2]["content"] != nil || len(body.Tools) != 1 {
			t.Fatalf("assistant %v tools %v", body.Messages[2], body.Tools)
		}
	}
}
