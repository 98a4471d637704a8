package sessions_test

import (
	stdctx "context"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
)

// goalTurnReplies make every turn two steps: a tool call, then text.
var goalTurnReplies = []scripted.Reply{
	{ToolCalls: []scripted.Call{{Name: "noop", Arguments: `{}`}}},
	{Text: "ok"},
}

func benchEnv(b *testing.B) (*env, *sessions.Session) {
	e := newEnv(b, setup{replies: goalTurnReplies})
	if err := e.tools.Register(e.root, tools.Tool{Name: "noop", Description: "does nothing",
		Execute: func(stdctx.Context, tools.Call) (tools.Result, error) { return tools.Result{Content: "done"}, nil }}); err != nil {
		b.Fatal(err)
	}
	return e, e.open(sessions.OpenOptions{})
}

// BenchmarkGoalTurn is one turn a goal drives: the session idle, the
// budget checked, a continuation through admission, the turn (a tool
// call and an answer), its usage counted. The model ran a tool, so no
// back-off is waited. Compare BenchmarkPromptedTurn, the same turn sent
// by Prompt and Wait.
func BenchmarkGoalTurn(b *testing.B) {
	e, s := benchEnv(b)
	ctx := stdctx.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuNow(b)
	if _, err := e.ctl.Goal(ctx, s.ID(), sessions.GoalRequest{Op: sessions.GoalSet, Objective: "bench",
		Budget: session.GoalBudget{Turns: b.N}}); err != nil {
		b.Fatal(err)
	}
	for {
		g, err := e.ctl.Goal(ctx, s.ID(), sessions.GoalRequest{Op: sessions.GoalShow})
		if err != nil {
			b.Fatal(err)
		}
		if g.State != session.GoalActive {
			if g.Spent.Turns != b.N {
				b.Fatalf("the goal ended %s after %d turns of %d: %s", g.State, g.Spent.Turns, b.N, g.Reason)
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuNow(b)-cpu)/float64(b.N), "cpu-ns/op")
	e.idle(s)
}

// BenchmarkPromptedTurn is the floor of BenchmarkGoalTurn: the same turn
// from Prompt and Wait.
func BenchmarkPromptedTurn(b *testing.B) {
	e, s := benchEnv(b)
	ctx := stdctx.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuNow(b)
	for range b.N {
		turn, err := e.ctl.Prompt(ctx, s.ID(), sessions.PromptRequest{Content: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := turn.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuNow(b)-cpu)/float64(b.N), "cpu-ns/op")
}
