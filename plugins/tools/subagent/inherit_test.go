package subagent_test

import (
	stdctx "context"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/tools/subagent"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/waterfall"
)

// TestASubagentWithoutProviderInheritsTheCallers: a subagent naming no
// template and no provider runs on the provider of the answer that called
// it, with its own system prompt and model.
func TestASubagentWithoutProviderInheritsTheCallers(t *testing.T) {
	e := newEnv(t, setup{
		// The child walks the parent's script too: its first reply's call
		// is refused (max_depth 1), its second is its answer.
		parent: []scripted.Reply{calls("gamma"), text("gamma's answer")},
		tool:   subagent.Config{Agents: []subagent.Agent{{Name: "gamma", SystemPrompt: "You are gamma. Answer briefly.", Model: "gamma-model"}}},
	})
	var mu sync.Mutex
	var reqs []llm.Request
	if _, err := agentloop.EventRequest.On(e.root, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		mu.Lock()
		reqs = append(reqs, ev.Request)
		mu.Unlock()
		return next.Call(ctx, ev)
	}); err != nil {
		t.Fatal(err)
	}
	p := e.parent("start")
	e.idle(p)
	if r := e.results(p)["call_1"]; r.IsError || r.Content != "gamma's answer" {
		t.Fatalf("the call's result: %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	var child *llm.Request
	for i := range reqs {
		if reqs[i].System == "You are gamma. Answer briefly." {
			child = &reqs[i]
			break
		}
	}
	if child == nil {
		t.Fatalf("no request carried gamma's system prompt: %+v", reqs)
	}
	if child.Provider != "parent" || child.Model != "gamma-model" {
		t.Fatalf("the child ran on %q/%q; want the caller's provider (parent) with its own model", child.Provider, child.Model)
	}
}
