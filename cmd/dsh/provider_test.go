package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestDeepSeekToolRoundTrip runs dsh against a local server speaking
// DeepSeek's wire format: the first answer reasons and calls the clock, the
// second answers. The second request must carry the tool result and the
// reasoning that led to the call.
func TestDeepSeekToolRoundTrip(t *testing.T) {
	streams := []string{"deepseek_reasoning_tool.sse", "text.sse"}
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n := len(bodies)
		bodies = append(bodies, body)
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer sk-local" || r.URL.Path != "/chat/completions" {
			http.Error(w, `{"error":{"message":"bad auth or path"}}`, http.StatusUnauthorized)
			return
		}
		data, _ := os.ReadFile(filepath.Join("../../plugins/llm/openai/testdata", streams[min(n, len(streams)-1)]))
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(data)
	}))
	defer srv.Close()

	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(`plugins:
  - use: llm.deepseek
    config:
      base_url: `+srv.URL+`
      api_key_env: LOCAL_DEEPSEEK_KEY
      model: deepseek-reasoner
  - use: tools.clock
agents:
  - id: main
    provider: deepseek
log:
  level: warn
`), 0o644)
	cmd := exec.Command(dshBin, "run", "--config", cfg, "-p", "what time is it?")
	cmd.Env = append(os.Environ(), "LOCAL_DEEPSEEK_KEY=sk-local")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstderr: %s", err, errb.String())
	}
	if out.String() != "Hello, world\n" || !strings.Contains(errb.String(), "The user wants the time.") || !strings.Contains(errb.String(), "→ clock") {
		t.Fatalf("stdout %q\nstderr %q", out.String(), errb.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("%d requests", len(bodies))
	}
	var second struct {
		Model    string           `json:"model"`
		Messages []map[string]any `json:"messages"`
		Tools    []map[string]any `json:"tools"`
	}
	json.Unmarshal(bodies[1], &second)
	var asst, tool map[string]any
	for _, m := range second.Messages {
		switch m["role"] {
		case "assistant":
			asst = m
		case "tool":
			tool = m
		}
	}
	if second.Model != "deepseek-reasoner" || len(second.Tools) != 1 {
		t.Fatalf("second request %s", bodies[1])
	}
	if asst == nil || asst["reasoning_content"] != "The user wants the time. I will call the clock." {
		t.Fatalf("the reasoning did not go back with the tool call: %v", asst)
	}
	if tool == nil || tool["tool_call_id"] != "call_00_abc" || !strings.Contains(tool["content"].(string), "UTC") {
		t.Fatalf("the tool result did not go back: %v", tool)
	}
}
