package acp

import (
	"bufio"
	"bytes"
	stdctx "context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/services/llm"
)

// The hub says a call started (in_progress) on its own channel, apart
// from the call's durable tool/call event (pending). Whatever order the
// two reach the pump in, the editor sees pending first: a status for a
// call it was never told of would be dropped or shown as a ghost.
func TestACallIsInProgressOnlyOnceAnnounced(t *testing.T) {
	var out bytes.Buffer
	srv := &Server{conn: acp.NewAgentSideConnection(nil, &out, eofReader{}), ctx: stdctx.Background(), log: slog.New(slog.DiscardHandler)}
	st := &conv{srv: srv, id: "s", cwd: "/w", announced: map[string]bool{}, early: map[string]bool{}}

	// The usual order: the call, then its start.
	st.toolCall(llm.ToolCall{ID: "a", Name: "read", Arguments: `{"path":"x"}`})
	st.toolStart("a")
	st.toolResult(llm.Message{ToolCallID: "a", Content: "text"})
	// A start that comes first waits for its call.
	st.toolStart("b")
	st.toolCall(llm.ToolCall{ID: "b", Name: "bash", Arguments: `{"command":"ls"}`})
	st.toolResult(llm.Message{ToolCallID: "b", Content: "boom", IsError: true})
	// The same id again, in a later turn, starts from nothing.
	st.toolCall(llm.ToolCall{ID: "b", Name: "bash", Arguments: `{"command":"ls"}`})
	st.toolResult(llm.Message{ToolCallID: "b", Content: "denied", IsError: true})

	got := map[string][]string{}
	lines := bufio.NewScanner(&out)
	for lines.Scan() {
		var n struct {
			Params struct {
				Update struct {
					SessionUpdate string `json:"sessionUpdate"`
					ToolCallID    string `json:"toolCallId"`
					Status        string `json:"status"`
				} `json:"update"`
			} `json:"params"`
		}
		if err := json.Unmarshal(lines.Bytes(), &n); err != nil {
			t.Fatalf("%v: %s", err, lines.Bytes())
		}
		u := n.Params.Update
		got[u.ToolCallID] = append(got[u.ToolCallID], u.Status)
	}
	want := map[string][]string{
		"a": {"pending", "in_progress", "completed"},
		"b": {"pending", "in_progress", "failed", "pending", "failed"},
	}
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Errorf("call %s: statuses %v; want %v", id, got[id], w)
		}
	}
	if len(st.announced)+len(st.early) != 0 {
		t.Errorf("ended calls are still tracked: announced %v, early %v", st.announced, st.early)
	}
}
