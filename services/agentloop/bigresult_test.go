package agentloop_test

import (
	stdctx "context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// A tool result over agentloop.OutOfLine is stored once in a persisted
// attachments store; the log keeps a preview and the reference, and the
// next request of the turn sends the model the whole text, with no parts.
// A result at the limit stays inline.
func TestALargeToolResultIsStoredOutOfLine(t *testing.T) {
	for _, size := range []int{agentloop.OutOfLine, agentloop.OutOfLine + 1, 3 << 20} {
		e := newEnv(t, nil, agentloop.Config{})
		f, _ := e.root.Plugin(attachments.Plugin, attachments.Options{Dir: t.TempDir()})
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
		// Not ASCII only: the preview is cut on a rune boundary.
		big := strings.Repeat("é", size/2) + strings.Repeat("x", size%2)
		e.tool("dump", func(stdctx.Context, tools.Call) (tools.Result, error) {
			return tools.Result{Content: big}, nil
		})
		model, err := scripted.New(scripted.Config{Replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "dump"}}}, {Text: "read it"}}})
		if err != nil {
			t.Fatal(err)
		}
		sp := &spy{Provider: model}
		e.registerProvider("spy", sp)
		h, _ := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "spy"}})
		h.Agent.Followup(user("dump it"))
		idle(t, h.Agent)

		var result *llm.Message
		for _, ev := range h.Agent.Session().Events(1) {
			if ev.Type == session.ToolResult {
				result = ev.Message
			}
		}
		inline := size <= agentloop.OutOfLine
		switch {
		case result == nil:
			t.Fatalf("size %d: no tool result", size)
		case inline && (result.Content != big || result.HasParts()):
			t.Fatalf("size %d: a result at the limit was changed: %d bytes, parts %+v", size, len(result.Content), result.Parts)
		case !inline && (len(result.Content) > 3<<10 || len(result.Parts) != 1 || result.Parts[0].Ref != attachments.RefOf([]byte(big)) || result.Parts[0].Size != int64(size)):
			t.Fatalf("size %d: the log keeps %d bytes of content and parts %+v; want a preview and the reference", size, len(result.Content), result.Parts)
		case !inline && (!strings.HasPrefix(big, strings.SplitN(result.Content, "\n[", 2)[0]) || !strings.Contains(result.Content, attachments.RefOf([]byte(big)))):
			t.Fatalf("size %d: the preview %q is not the result's start with its reference", size, result.Content[len(result.Content)-200:])
		}
		sp.mu.Lock()
		sent := sp.reqs[1].History.At(sp.reqs[1].History.Len() - 1)
		sp.mu.Unlock()
		if sent.Role != llm.RoleTool || sent.Content != big || sent.HasParts() {
			t.Fatalf("size %d: the model got the result as %d bytes with parts %+v; want the whole text", size, len(sent.Content), sent.Parts)
		}
		h.Dispose(stdctx.Background())
	}
}
