package agentloop_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/tools"
)

// BenchmarkToolCallsOfAStep is a turn whose first step asks for 8 calls of
// a zero-cost tool and whose second step answers, session appends
// included. The two variants differ only in how the calls are scheduled.
func BenchmarkToolCallsOfAStep(b *testing.B) {
	const n = 8
	for _, kind := range []struct {
		name string
		safe bool
	}{{"parallel-safe", true}, {"exclusive", false}} {
		b.Run(kind.name, func(b *testing.B) {
			names := make([]string, n)
			for i := range names {
				names[i] = "free"
			}
			e := newEnv(b, []scripted.Reply{{ToolCalls: calls(names...)}, {Text: "done"}}, agentloop.Config{})
			if err := e.tools.Register(e.root, tools.Tool{Name: "free", ParallelSafe: kind.safe,
				Execute: func(stdctx.Context, tools.Call) (tools.Result, error) { return tools.Result{Content: "ok"}, nil }}); err != nil {
				b.Fatal(err)
			}
			a := e.create("a").Agent
			b.ReportAllocs()
			for b.Loop() {
				runTurn(b, a)
			}
		})
	}
}
