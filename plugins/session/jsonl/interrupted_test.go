package jsonl_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
)

// TestAResumeClosesATurnCutInsideATool: a file that ends inside a tool
// call, its last line cut short — dsh killed mid-tool — resumes with the
// turn closed, the call answered as interrupted, the prompt reported, and
// the next request valid for every provider.
func TestAResumeClosesATurnCutInsideATool(t *testing.T) {
	dir := t.TempDir()
	replies := []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "echo"}}}, {Text: "done"}, {Text: "again"}}
	r := newRuntime(t, dir, replies...)
	r.tools.Register(r.root, tools.Tool{Name: "echo", Description: "echo", Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: "echoed"}, nil
	}})
	h, _ := r.create(t, "a", "s1")
	h.Agent.Followup(llm.Message{Content: "use the tool"})
	h.Agent.WhenIdle(stdctx.Background())
	if err := h.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s1.jsonl")
	raw, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(raw), "\n")
	cut := 0
	for i, l := range lines {
		if strings.Contains(l, `"type":"tool/call"`) {
			cut = i + 1
		}
	}
	// Keep up to the tool call, and half of the line after it.
	os.WriteFile(path, []byte(strings.Join(lines[:cut], "")+lines[cut][:len(lines[cut])/2]), 0o600)

	r2 := newRuntime(t, dir, replies[2])
	var sent llm.History
	agentloop.EventRequest.On(r2.root, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		sent = ev.Request.History
		return next.Call(ctx, ev)
	})
	h2, err := r2.resume("a", "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Dispose(stdctx.Background())
	in, ok := h2.Agent.Session().Interrupted()
	if !ok || in.Prompt.Content != "use the tool" || in.Unanswered != 1 {
		t.Fatalf("Interrupted() = %+v, %v", in, ok)
	}
	h2.Agent.Followup(llm.Message{Content: "next"})
	h2.Agent.WhenIdle(stdctx.Background())
	var roles []string
	for _, m := range sent.All() {
		roles = append(roles, string(m.Role))
		if m.Role == llm.RoleTool && (!m.IsError || !strings.Contains(m.Content, "interrupted")) {
			t.Fatalf("the unanswered call got %+v", m)
		}
	}
	if strings.Join(roles, ",") != "user,assistant,tool,user" {
		t.Fatalf("next request history %v", roles)
	}
}
