package openai_test

import (
	stdctx "context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/syncbuf"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/openai"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

// Through the plugin, as dsh loads it: the retry lines reach the tree's
// logger at info.
func TestRetriesLogAtInfoWithStatusAndWait(t *testing.T) {
	s, _ := server(t,
		answer{Status: 429, Header: map[string]string{"Retry-After": "0"}, Body: `{"error":{"message":"slow down"}}`},
		answer{Status: 503, Body: "overloaded"},
		answer{Stall: true},
		answer{File: "text.sse"})
	t.Setenv("DEEPSEEK_API_KEY", "sk-ds")
	var out syncbuf.Buffer
	root := dshctx.New(dshctx.WithLogger(hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})))
	defer root.Dispose(stdctx.Background())
	if _, err := root.Plugin(llm.Plugin, nil); err != nil {
		t.Fatal(err)
	}
	cfg := openai.Config{Common: httpx.Common{BaseURL: s.URL, Model: "m", RetryBackoff: time.Millisecond, IdleTimeout: 50 * time.Millisecond}}
	if _, err := root.Plugin(openai.DeepSeekPlugin, cfg); err != nil {
		t.Fatal(err)
	}
	svc, err := llm.Key.Get(root)
	if err != nil {
		t.Fatal(err)
	}
	st, err := svc.Stream(stdctx.Background(), llm.Request{AgentID: "main", Provider: "deepseek", History: hello().History})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		if _, err := st.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "retrying the model request") {
			lines = append(lines, l)
		}
	}
	want := [][]string{
		{"[INFO]", "provider=deepseek", "status=429", "wait=1ms", "retry_after=true", "retry=1/3"},
		{"[INFO]", "status=503", "wait=", "retry_after=false", "retry=2/3"},
		{"[INFO]", `status="stalled before the first chunk"`, "idle_timeout=50ms", "retry=1/3"},
	}
	if len(lines) != len(want) {
		t.Fatalf("want one line per retry (%d), got:\n%s", len(want), out.String())
	}
	for i, parts := range want {
		for _, p := range parts {
			if !strings.Contains(lines[i], p) {
				t.Fatalf("retry line %d lacks %q: %s", i+1, p, lines[i])
			}
		}
	}
}
