package llm_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/llm"
)

// TestChunksRoundTripThroughJSON: a chunk written as JSON — a persisted
// session, a plugin's payload — reads back as the same chunk.
func TestChunksRoundTripThroughJSON(t *testing.T) {
	for _, c := range []llm.Chunk{
		{Kind: llm.ChunkText, Text: "hi"},
		{Kind: llm.ChunkReasoning, Text: "hmm"},
		{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: 1, ID: "call_1", Name: "clock", Arguments: "{}"}},
		{Kind: llm.ChunkUsage, Usage: &llm.Usage{InputTokens: 3}},
		{Kind: llm.ChunkFinish, Finish: llm.FinishStop},
	} {
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back llm.Chunk
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("%s does not read back: %v", raw, err)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(raw) || back.Kind != c.Kind {
			t.Fatalf("%s read back as %s", raw, again)
		}
	}
	var c llm.Chunk
	if err := json.Unmarshal([]byte(`{"kind":"telepathy"}`), &c); err == nil || !strings.Contains(err.Error(), `unknown chunk kind "telepathy"`) {
		t.Fatalf("an unknown kind must be an error that names it, got %v", err)
	}
}
