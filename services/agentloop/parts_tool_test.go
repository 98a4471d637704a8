package agentloop_test

import (
	stdctx "context"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// spy answers with a scripted model and keeps the requests.
type spy struct {
	*scripted.Provider
	mu   sync.Mutex
	reqs []llm.Request
}

func (s *spy) Stream(ctx stdctx.Context, req llm.Request) (llm.Stream, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	return s.Provider.Stream(ctx, req)
}

// An image a tool returns is stored, referenced by the tool/result
// message, and sent with its bytes in the next request of the turn.
func TestAToolsImageIsStoredAndSentToTheModel(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	f, _ := e.root.Plugin(attachments.Plugin, nil)
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	img := []byte("\x89PNG\r\n\x1a\nscreen pixels")
	e.tool("snap", func(stdctx.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: "a screenshot", Parts: []llm.Part{{Type: llm.PartImage, Name: "s.png", Data: img}}}, nil
	})
	model, err := scripted.New(scripted.Config{Replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "snap"}}}, {Text: "I see it"}}})
	if err != nil {
		t.Fatal(err)
	}
	sp := &spy{Provider: model}
	e.registerProvider("spy", sp)
	h, _ := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "spy"}})
	defer h.Dispose(stdctx.Background())
	h.Agent.Followup(user("take a screenshot"))
	idle(t, h.Agent)

	var result *llm.Message
	for _, ev := range h.Agent.Session().Events(1) {
		if ev.Type == session.ToolResult {
			result = ev.Message
		}
	}
	if result == nil || len(result.Parts) != 2 || result.Parts[0].Text != "a screenshot" || result.Parts[1].Ref != attachments.RefOf(img) || result.Parts[1].Data != nil {
		t.Fatalf("the tool/result message is %+v; want its text then the image by reference", result)
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if len(sp.reqs) != 2 {
		t.Fatalf("%d requests; want 2", len(sp.reqs))
	}
	last := sp.reqs[1].History
	sent := last.At(last.Len() - 1)
	if sent.Role != llm.RoleTool || string(sent.Parts[1].Data) != string(img) {
		t.Fatalf("the second request sent the tool result as %+v; want the image's bytes", sent)
	}
}
