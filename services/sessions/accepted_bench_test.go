package sessions_test

import (
	stdctx "context"
	"strconv"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/sessions"
)

// BenchmarkAcceptedPrompt is what an accepted prompt costs its sender
// (serve's POST → 202), session.jsonl storing the log: with a request id
// the answer waits until the log holds a record of the message — the
// prompt checkpoint of the turn it starts ("idle"), or its message/queued
// checkpointed by the outcome writer while a turn is held in a tool call
// ("queued") — so a crash after the answer cannot lose it. Without a
// request id (no retry could ask for it) the sender is answered once the
// message is in the inbox: the floor. Only the Prompt call is timed, and
// cpu-ns/op is the process's CPU time across it.
func BenchmarkAcceptedPrompt(b *testing.B) {
	for _, v := range []struct {
		name           string
		recorded, turn bool
	}{{"idle/no-request-id", false, false}, {"idle/request-id", true, false}, {"queued/no-request-id", false, true}, {"queued/request-id", true, true}} {
		b.Run(v.name, func(b *testing.B) {
			replies := []scripted.Reply{{Text: "ok"}}
			if v.turn {
				replies = []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "done"}}
			}
			e := newEnv(b, setup{dir: b.TempDir(), replies: replies})
			g := e.gateTool("block")
			ctx := stdctx.Background()
			if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
				b.Fatal(err)
			}
			s := mustSession(b, e, "w")
			if v.turn {
				if _, err := s.Prompt(ctx, sessions.PromptRequest{Content: "block"}); err != nil {
					b.Fatal(err)
				}
				g.wait(b)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				req := sessions.PromptRequest{Content: "hi"}
				if v.recorded {
					req.RequestID = "r" + strconv.Itoa(i)
				}
				c0 := testkit.CPUTime()
				// The Session, not the service, which would make a request id.
				if _, err := s.Prompt(ctx, req); err != nil {
					b.Fatal(err)
				}
				cpu += testkit.CPUTime() - c0
				if !v.turn {
					// Its turn runs untimed; the next prompt finds the
					// session idle again.
					b.StopTimer()
					if err := e.ctl.Idle(ctx, "w"); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(cpu/time.Nanosecond)/float64(b.N), "cpu-ns/op")
			b.StopTimer()
			if err := e.ctl.Close(ctx, "w"); err != nil {
				b.Fatal(err)
			}
		})
	}
}
