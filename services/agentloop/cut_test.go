package agentloop_test

import (
	stdctx "context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/waterfall"
)

// A cancel in the middle of a streamed answer keeps what had streamed: the
// log records it with finish "cut" (text only), and the next turn's request
// carries it, marked as stopped.
func TestACancelledAnswerIsKeptAndMarked(t *testing.T) {
	e := newEnv(t, []scripted.Reply{
		{Text: "one two three four five six", ToolCalls: []scripted.Call{{Name: "never"}}},
		{Text: "fine"},
	}, agentloop.Config{})
	a := e.create("a").Agent
	var once sync.Once
	chunks := 0
	agentloop.EventStreamChunk.On(a.Context(), func(_ stdctx.Context, c agentloop.StreamChunk) error {
		if c.Chunk.Kind == llm.ChunkText {
			if chunks++; chunks == 3 {
				once.Do(func() { a.Cancel(errors.New("test")) })
			}
		}
		return nil
	})
	var mu sync.Mutex
	var last llm.Request
	agentloop.EventRequest.On(e.root, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		mu.Lock()
		last = ev.Request
		mu.Unlock()
		return next.Call(ctx, ev)
	})
	a.Followup(user("count"))
	idle(t, a)
	assertTrace(t, a.Session(), "turn/start", "user/message:count", "step/start", "assistant/message", "turn/end:aborted")
	ev := a.Session().Events(4)[0]
	if ev.Finish != session.FinishCut || ev.Message.Content != "one two three " || len(ev.Message.ToolCalls) != 0 {
		t.Fatalf("the cut answer is recorded as %+v (%q)", ev, ev.Message.Content)
	}
	a.Followup(user("go on"))
	idle(t, a)
	mu.Lock()
	h := last.History
	mu.Unlock()
	if h.Len() != 3 || h.At(1).Role != llm.RoleAssistant || h.At(1).Content != "one two three "+session.CutNote {
		t.Fatalf("the next request has %d messages; the second: %+v", h.Len(), h.At(min(1, h.Len()-1)))
	}
	if !strings.Contains(session.CutNote, "stopped") {
		t.Fatal("the note does not say the answer was stopped")
	}
}
