package agentloop_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// TestChunksGoToListenersTheLogKeepsTheMessage: each stream chunk reaches
// agent/stream-chunk in the agent's scope, naming the turn, the step and
// the id of the message it builds; the session records no chunk, only the
// assembled assistant/message with that id, its reasoning and its usage.
func TestChunksGoToListenersTheLogKeepsTheMessage(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{
		Reasoning: "think first", Text: "the answer is here",
		Usage: &llm.Usage{InputTokens: 7, OutputTokens: 4},
	}}, agentloop.Config{})
	a := e.create("a").Agent
	var mu sync.Mutex
	var heard []agentloop.StreamChunk
	agentloop.EventStreamChunk.On(a.Context(), func(_ stdctx.Context, c agentloop.StreamChunk) error {
		mu.Lock()
		heard = append(heard, c)
		mu.Unlock()
		return nil
	})
	a.Followup(user("q"))
	idle(t, a)
	assertTrace(t, a.Session(), "turn/start", "user/message:q", "step/start", "assistant/message", "step/end", "turn/end:completed")

	var msg session.Event
	for _, ev := range a.Session().Events(1) {
		if ev.Type == session.AssistantMessage {
			msg = ev
		}
	}
	if msg.Message == nil || msg.Message.ID == "" || msg.Message.Reasoning != "think first" || msg.Message.Content != "the answer is here" ||
		msg.Usage == nil || msg.Usage.OutputTokens != 4 || msg.Finish != llm.FinishStop {
		t.Fatalf("assistant/message does not carry the assembled message: %+v %+v", msg, msg.Message)
	}
	mu.Lock()
	defer mu.Unlock()
	var text, reasoning strings.Builder
	kinds := map[llm.ChunkKind]bool{}
	for _, c := range heard {
		if c.Agent.ID() != "a" || c.Turn != 1 || c.Step != 1 || c.MessageID != msg.Message.ID {
			t.Fatalf("chunk names agent %q turn %d step %d message %q; want a, 1, 1, %q", c.Agent.ID(), c.Turn, c.Step, c.MessageID, msg.Message.ID)
		}
		kinds[c.Chunk.Kind] = true
		switch c.Chunk.Kind {
		case llm.ChunkText:
			text.WriteString(c.Chunk.Text)
		case llm.ChunkReasoning:
			reasoning.WriteString(c.Chunk.Text)
		}
	}
	if text.String() != "the answer is here" || reasoning.String() != "think first" || !kinds[llm.ChunkUsage] || !kinds[llm.ChunkFinish] {
		t.Fatalf("listeners heard text %q, reasoning %q, kinds %v", text.String(), reasoning.String(), kinds)
	}
}

// TestStreamChunksStayInTheirAgentsScope: another agent's listener hears
// nothing.
func TestStreamChunksStayInTheirAgentsScope(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	a, b := e.create("a").Agent, e.create("b").Agent
	var mu sync.Mutex
	heard := 0
	agentloop.EventStreamChunk.On(a.Context(), func(stdctx.Context, agentloop.StreamChunk) error {
		mu.Lock()
		heard++
		mu.Unlock()
		return nil
	})
	b.Followup(user("only b"))
	idle(t, b)
	mu.Lock()
	defer mu.Unlock()
	if heard != 0 {
		t.Fatalf("a's listener heard %d of b's chunks", heard)
	}
}

// TestAnOldLogWithChunksResumes: a session file written when chunks were
// session events loads; the chunks are ignored and the history is the
// messages.
func TestAnOldLogWithChunksResumes(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	dir := e.persisted()
	old := `{"seq":1,"type":"turn/start","time":"2026-11-01T10:00:00Z","turn":1}
{"seq":2,"type":"user/message","time":"2026-11-01T10:00:00Z","turn":1,"message":{"id":"u1","role":"user","content":"hi"}}
{"seq":3,"type":"step/start","time":"2026-11-01T10:00:00Z","turn":1,"step":1}
{"seq":4,"type":"assistant/chunk","time":"2026-11-01T10:00:00Z","turn":1,"step":1,"chunk":{"kind":"text","text":"hel"}}
{"seq":5,"type":"assistant/chunk","time":"2026-11-01T10:00:00Z","turn":1,"step":1,"chunk":{"kind":"text","text":"lo"}}
{"seq":6,"type":"assistant/chunk","time":"2026-11-01T10:00:00Z","turn":1,"step":1,"chunk":{"kind":"finish","finish":"stop"}}
{"seq":7,"type":"assistant/message","time":"2026-11-01T10:00:00Z","turn":1,"step":1,"message":{"role":"assistant","content":"hello"},"usage":{},"finish":"stop"}
{"seq":8,"type":"step/end","time":"2026-11-01T10:00:00Z","turn":1,"step":1}
{"seq":9,"type":"turn/end","time":"2026-11-01T10:00:00Z","turn":1,"reason":"completed"}
`
	if err := os.WriteFile(filepath.Join(dir, "old.jsonl"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := e.registry.Resume(stdctx.Background(), agents.ResumeOptions{AgentID: "a", ResumeSessionID: "old", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Dispose(stdctx.Background())
	var got []string
	for _, m := range h.Agent.Session().History().Messages() {
		got = append(got, string(m.Role)+":"+m.Content)
	}
	if strings.Join(got, "|") != "user:hi|assistant:hello" {
		t.Fatalf("history of the old log: %v", got)
	}
	h.Agent.Followup(user("again"))
	idle(t, h.Agent)
	if ends := turnEnds(h.Agent.Session()); len(ends) != 2 || ends[1] != "completed" {
		t.Fatalf("turn ends after resuming: %v", ends)
	}
}
