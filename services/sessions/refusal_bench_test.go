package sessions_test

import (
	stdctx "context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
)

// BenchmarkRefusal is what a refused prompt costs its sender, session.jsonl
// storing the log: "unrecorded" (no request id: the refusal is not the
// message's recorded fate, and only its decision record is written, while
// the sender goes on: the floor) against "recorded" (a request id: the
// refusal is written and checkpointed before the sender is answered, so a
// crash cannot take the answer back). The plain variants refuse to an idle
// session, whose driver writes the refusal; "during-a-turn" ones refuse
// while a turn is held in a tool call, where the agent's outcome writer
// writes it. cpu-ns/op is the process's CPU time per refusal, the writes
// included.
func BenchmarkRefusal(b *testing.B) {
	for _, v := range []struct {
		name           string
		recorded, turn bool
	}{{"unrecorded", false, false}, {"recorded", true, false}, {"during-a-turn/unrecorded", false, true}, {"during-a-turn/recorded", true, true}} {
		b.Run(v.name, func(b *testing.B) {
			e := newEnv(b, setup{dir: b.TempDir(), replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "done"}}})
			g := e.gateTool("block")
			ctx := stdctx.Background()
			if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
				b.Fatal(err)
			}
			agentcontroller.EventAdmission.On(e.root, func(c stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
				if a.Message.Content == "block" {
					return next.Call(c, a)
				}
				return agentcontroller.Reject("bench/no", "not now", false), nil
			})
			s := mustSession(b, e, "w")
			if v.turn {
				if _, err := s.Prompt(ctx, sessions.PromptRequest{Content: "block"}); err != nil {
					b.Fatal(err)
				}
				g.wait(b)
			}
			b.ReportAllocs()
			i := 0
			cpu := testkit.CPUTime()
			for b.Loop() {
				i++
				req := sessions.PromptRequest{Content: "hi"}
				if v.recorded {
					req.RequestID = "r" + strconv.Itoa(i)
				}
				// The Session, not the service, which would make a request id.
				if _, err := s.Prompt(ctx, req); err == nil {
					b.Fatalf("not refused: %v", err)
				}
			}
			b.ReportMetric(float64((testkit.CPUTime()-cpu)/time.Nanosecond)/float64(b.N), "cpu-ns/op")
			b.StopTimer()
			if err := e.ctl.Close(ctx, "w"); err != nil {
				b.Fatal(err)
			}
		})
	}
	// Concurrent senders (a flood a rate limit refuses) share the
	// driver's checkpoints: each waits for one, and one covers all the
	// refusals written since the last.
	b.Run("recorded-16-senders", func(b *testing.B) {
		e := newEnv(b, setup{dir: b.TempDir()})
		ctx := stdctx.Background()
		if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
			b.Fatal(err)
		}
		agentcontroller.EventAdmission.On(e.root, func(_ stdctx.Context, _ agentcontroller.Admission, _ agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			return agentcontroller.Reject("bench/no", "not now", false), nil
		})
		s := mustSession(b, e, "w")
		var n atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(8) // 16 on 2 cores
		cpu := testkit.CPUTime()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Prompt(ctx, sessions.PromptRequest{Content: "hi", RequestID: "r" + strconv.FormatInt(n.Add(1), 10)}); err == nil {
					b.Error("not refused")
					return
				}
			}
		})
		b.ReportMetric(float64((testkit.CPUTime()-cpu)/time.Nanosecond)/float64(b.N), "cpu-ns/op")
		b.StopTimer()
		if err := e.ctl.Close(ctx, "w"); err != nil {
			b.Fatal(err)
		}
	})
}
