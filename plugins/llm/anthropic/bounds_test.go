package anthropic_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/internal/llmtest"
	"github.com/dsh-go/dsh/services/llm"
)

// limits are far below what the flood server sends (llmtest.FloodBytes).
var limits = llm.Limits{MaxTextBytes: 64 << 10, MaxReasoningBytes: 64 << 10, MaxToolArgumentBytes: 64 << 10, MaxToolCalls: 16}

func delta(index int, kind, field, value string) string {
	return fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":%q,%q:%q}}\n\n", index, kind, field, value)
}

func blockStart(index int, block string) string {
	return fmt.Sprintf("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":%s}\n\n", index, block)
}

// A provider that streams far more than the limits is read only up to
// them: the model service stops reading, what is assembled stays within
// the limits, and so does the memory it took.
func TestAFloodIsReadOnlyUpToTheLimits(t *testing.T) {
	piece := strings.Repeat("x", 1000)
	cases := []struct {
		name  string
		head  string
		event func(i int) string
		check func(t *testing.T, m llm.Message, finish llm.FinishReason)
	}{
		{"text", messageStart + blockStart(0, `{"type":"text"}`), func(int) string {
			return delta(0, "text_delta", "text", piece)
		}, func(t *testing.T, m llm.Message, finish llm.FinishReason) {
			if len(m.Content) != limits.MaxTextBytes || finish != llm.FinishMaxTokens {
				t.Fatalf("text of %d bytes, finish %q; want %d bytes cut as max-tokens", len(m.Content), finish, limits.MaxTextBytes)
			}
		}},
		{"thinking", messageStart + blockStart(0, `{"type":"thinking"}`), func(int) string {
			return delta(0, "thinking_delta", "thinking", piece)
		}, func(t *testing.T, m llm.Message, finish llm.FinishReason) {
			if len(m.Reasoning) != limits.MaxReasoningBytes || finish != llm.FinishMaxTokens {
				t.Fatalf("reasoning of %d bytes, finish %q", len(m.Reasoning), finish)
			}
		}},
		{"arguments", messageStart + blockStart(0, `{"type":"tool_use","id":"toolu_1","name":"write"}`), func(i int) string {
			return delta(0, "input_json_delta", "partial_json", piece)
		}, func(t *testing.T, m llm.Message, finish llm.FinishReason) {
			if len(m.ToolCalls) != 1 || finish != llm.FinishToolCalls {
				t.Fatalf("calls %d, finish %q", len(m.ToolCalls), finish)
			}
			c := m.ToolCalls[0]
			if c.ID != "toolu_1" || c.Name != "write" || c.Arguments != "{}" || !strings.Contains(c.Refused, "max_tool_argument_bytes") {
				t.Fatalf("the call over the limit must keep its id and name, drop its arguments and say why: %+v", c)
			}
		}},
		{"calls", messageStart, func(i int) string {
			return blockStart(i, fmt.Sprintf(`{"type":"tool_use","id":"toolu_%d","name":"clock"}`, i)) + delta(i, "input_json_delta", "partial_json", "{}")
		}, func(t *testing.T, m llm.Message, finish llm.FinishReason) {
			n := limits.MaxToolCalls
			if len(m.ToolCalls) != n+1 || finish != llm.FinishToolCalls || !strings.Contains(m.ToolCalls[n].Refused, "max_tool_calls") {
				t.Fatalf("calls %d, finish %q; want the %d allowed and the first one over refused", len(m.ToolCalls), finish, n)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, sent := llmtest.Flood(t, tc.head, tc.event)
			req := hello()
			req.Limits = limits
			a, heap, err := llmtest.Bounded(t, provider(t, s, 0), req)
			if err != nil {
				t.Fatal(err)
			}
			finish, _ := a.Finish()
			tc.check(t, a.Message(), finish)
			t.Logf("server wrote %d bytes, live heap grew %d bytes", sent.Load(), heap)
			// The socket buffers of a loopback connection hold a few MiB;
			// a client that read on would have taken all 64 MiB.
			if n := sent.Load(); n > 16<<20 {
				t.Fatalf("the server wrote %d bytes: the stream was read on past the limit", n)
			}
			if heap > 8<<20 {
				t.Fatalf("the live heap grew by %d bytes for limits of 64 KiB", heap)
			}
		})
	}
}
