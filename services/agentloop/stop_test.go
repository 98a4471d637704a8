package agentloop_test

import (
	stdctx "context"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// A listener of agent/stop ends the turn after an answer: the answer is
// recorded, its calls are answered as not executed, and the turn ends
// with the Stop's reason and its message as turn/end's error. The next
// turn is stopped before its first model request.
func TestAStopEndsTheTurnWithItsReason(t *testing.T) {
	e := newEnv(t, []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "t", Arguments: `{}`}}},
		{ToolCalls: []scripted.Call{{Name: "t", Arguments: `{}`}}},
		{Text: "never"},
	}, agentloop.Config{})
	var ran atomic.Int32
	e.tool("t", func(stdctx.Context, tools.Call) (tools.Result, error) {
		ran.Add(1)
		return tools.Result{Content: "ok"}, nil
	})
	var checks []agentloop.StopCheck
	spent := false
	if _, err := agentloop.EventStop.On(e.root, func(ctx stdctx.Context, c agentloop.StopCheck, next agentloop.StopNext) (agentloop.Stop, error) {
		checks = append(checks, c)
		if c.Answered && c.Step == 2 {
			spent = true
		}
		if spent {
			return agentloop.Stop{Reason: agentloop.ReasonBudget, Message: "budget/tokens: spent"}, nil
		}
		return next.Call(ctx, c)
	}); err != nil {
		t.Fatal(err)
	}
	h := e.create("a")
	h.Agent.Followup(user("go"))
	idle(t, h.Agent)
	assertTrace(t, h.Agent.Session(),
		"turn/start", "user/message:go",
		"step/start", "assistant/message", "tool/call:t", "tool/result", "step/end",
		"step/start", "assistant/message", "tool/result", "step/end",
		"turn/end:budget")
	if ran.Load() != 1 {
		t.Fatalf("the tool ran %d times; the stopped step's call must not run", ran.Load())
	}
	evs := h.Agent.Session().Events(1)
	var unrun, end session.Event
	for _, ev := range evs {
		switch ev.Type {
		case session.ToolResult:
			unrun = ev
		case session.TurnEnd:
			end = ev
		}
	}
	if unrun.Message.Content != "not executed: budget/tokens: spent" || !unrun.Message.IsError || end.Error != "budget/tokens: spent" {
		t.Fatalf("the unrun call's result %+v, the turn's end %+v", unrun.Message, end)
	}
	want := []agentloop.StopCheck{{Turn: 1, Step: 1}, {Turn: 1, Step: 1, Answered: true}, {Turn: 1, Step: 2}, {Turn: 1, Step: 2, Answered: true}}
	for i := range want {
		if want[i].Turn != checks[i].Turn || want[i].Step != checks[i].Step || want[i].Answered != checks[i].Answered || checks[i].Agent != h.Agent {
			t.Fatalf("check %d: %+v, want %+v", i, checks[i], want[i])
		}
	}

	h.Agent.Followup(user("again"))
	idle(t, h.Agent)
	if ends := turnEnds(h.Agent.Session()); len(ends) != 2 || ends[1] != agentloop.ReasonBudget {
		t.Fatalf("turn ends %q", ends)
	}
	for _, ev := range h.Agent.Session().Events(1) {
		if ev.Type == session.StepStart && ev.Turn == 2 {
			t.Fatal("the second turn asked the model although its budget was spent")
		}
	}
}
