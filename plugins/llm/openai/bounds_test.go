package openai_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/internal/llmtest"
	"github.com/dsh-go/dsh/services/llm"
)

// limits are far below what the flood server sends (llmtest.FloodBytes).
var limits = llm.Limits{MaxTextBytes: 64 << 10, MaxReasoningBytes: 64 << 10, MaxToolArgumentBytes: 64 << 10, MaxToolCalls: 16}

// A provider that streams far more than the limits is read only up to
// them: the model service stops reading (the server could write little
// more than the socket buffers hold), what is assembled stays within the
// limits, and so does the memory it took.
func TestAFloodIsReadOnlyUpToTheLimits(t *testing.T) {
	piece := strings.Repeat("x", 1000)
	cases := []struct {
		name  string
		event func(i int) string
		check func(t *testing.T, m llm.Message, finish llm.FinishReason)
	}{
		{"text", func(int) string {
			return `data: {"choices":[{"index":0,"delta":{"content":"` + piece + `"}}]}` + "\n\n"
		}, func(t *testing.T, m llm.Message, finish llm.FinishReason) {
			if len(m.Content) != limits.MaxTextBytes || finish != llm.FinishMaxTokens {
				t.Fatalf("text of %d bytes, finish %q; want %d bytes cut as max-tokens", len(m.Content), finish, limits.MaxTextBytes)
			}
		}},
		{"reasoning", func(int) string {
			return `data: {"choices":[{"index":0,"delta":{"reasoning_content":"` + piece + `"}}]}` + "\n\n"
		}, func(t *testing.T, m llm.Message, finish llm.FinishReason) {
			if len(m.Reasoning) != limits.MaxReasoningBytes || finish != llm.FinishMaxTokens {
				t.Fatalf("reasoning of %d bytes, finish %q", len(m.Reasoning), finish)
			}
		}},
		{"arguments", func(i int) string {
			if i == 0 {
				return `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"write","arguments":"{\"text\":\""}}]}}]}` + "\n\n"
			}
			return `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + piece + `"}}]}}]}` + "\n\n"
		}, func(t *testing.T, m llm.Message, finish llm.FinishReason) {
			if len(m.ToolCalls) != 1 || finish != llm.FinishToolCalls {
				t.Fatalf("calls %d, finish %q", len(m.ToolCalls), finish)
			}
			c := m.ToolCalls[0]
			if c.ID != "c1" || c.Name != "write" || c.Arguments != "{}" || !strings.Contains(c.Refused, "max_tool_argument_bytes") {
				t.Fatalf("the call over the limit must keep its id and name, drop its arguments and say why: %+v", c)
			}
		}},
		{"calls", func(i int) string {
			return fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"c%d","function":{"name":"clock","arguments":"{}"}}]}}]}`, i, i) + "\n\n"
		}, func(t *testing.T, m llm.Message, finish llm.FinishReason) {
			n := limits.MaxToolCalls
			if len(m.ToolCalls) != n+1 || finish != llm.FinishToolCalls {
				t.Fatalf("calls %d, finish %q; want the %d allowed and the first one over", len(m.ToolCalls), finish, n)
			}
			if m.ToolCalls[n-1].Refused != "" || !strings.Contains(m.ToolCalls[n].Refused, "max_tool_calls") {
				t.Fatalf("only the call over max_tool_calls is refused: %+v", m.ToolCalls[n-1:])
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, sent := llmtest.Flood(t, "", tc.event)
			p := tuned(t, s, func(*httpx.Common) {})
			req := hello()
			req.Limits = limits
			a, heap, err := llmtest.Bounded(t, p, req)
			if err != nil {
				t.Fatal(err)
			}
			finish, _ := a.Finish()
			tc.check(t, a.Message(), finish)
			// The socket buffers of a loopback connection hold a few MiB;
			// a client that read on would have taken all 64 MiB.
			if n := sent.Load(); n > 16<<20 {
				t.Fatalf("the server wrote %d bytes: the stream was read on past the limit", n)
			}
			t.Logf("server wrote %d bytes, live heap grew %d bytes", sent.Load(), heap)
			if heap > 8<<20 {
				t.Fatalf("the live heap grew by %d bytes for limits of 64 KiB", heap)
			}
		})
	}
}
