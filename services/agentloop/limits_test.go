package agentloop_test

import (
	stdctx "context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// One reply asking for more subagents, and more calls, than the agent's
// limits allow: the calls within the limits run, each one over them is
// answered with an error saying which limit, every result is recorded in
// the model's order, and the turn goes on so the model hears about it.
func TestCallsOverTheStepLimitsAreRefused(t *testing.T) {
	var calls []scripted.Call
	for range 3 {
		calls = append(calls, scripted.Call{Name: "spawn", Arguments: `{}`}, scripted.Call{Name: "plain", Arguments: `{}`})
	}
	e := newEnv(t, []scripted.Reply{{ToolCalls: calls}, {Text: "done"}}, agentloop.Config{})
	var spawned, plain atomic.Int32
	count := func(n *atomic.Int32) func(stdctx.Context, tools.Call) (tools.Result, error) {
		return func(stdctx.Context, tools.Call) (tools.Result, error) {
			n.Add(1)
			return tools.Result{Content: "ok"}, nil
		}
	}
	if err := e.tools.Register(e.root, tools.Tool{Name: "spawn", Description: "starts an agent", Spawns: true, ParallelSafe: true, Execute: count(&spawned)}); err != nil {
		t.Fatal(err)
	}
	e.tool("plain", count(&plain))
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{
		Provider: "scripted", Limits: llm.Limits{MaxSubagentCalls: 2, MaxToolCalls: 5},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Dispose(stdctx.Background()) })
	h.Agent.Followup(user("go"))
	idle(t, h.Agent)

	if spawned.Load() != 2 || plain.Load() != 2 {
		t.Fatalf("ran %d subagent calls and %d others; want 2 and 2 (calls 1-4 of 6; call 5 is the third subagent, call 6 past max_tool_calls)", spawned.Load(), plain.Load())
	}
	var results []string
	var last string
	for _, ev := range h.Agent.Session().Events(1) {
		switch {
		case ev.Type == session.ToolResult:
			results = append(results, ev.Message.Content)
		case ev.Type == session.AssistantMessage && ev.Message.Content != "":
			last = ev.Message.Content
		}
	}
	if len(results) != 6 || results[0] != "ok" || results[3] != "ok" ||
		!strings.Contains(results[4], "max_subagent_calls") || !strings.Contains(results[5], "max_tool_calls") {
		t.Fatalf("results in the model's order: %q", results)
	}
	if last != "done" {
		t.Fatalf("the turn must go on after the refusals; last answer %q", last)
	}
}
