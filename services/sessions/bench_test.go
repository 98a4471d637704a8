package sessions_test

import (
	stdctx "context"
	"strconv"
	"testing"

	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/sessions"
)

// BenchmarkSessionCycle compares one session's life through the controller
// (open, first prompt, its turn, close) with the bare agent create, the same
// delivery and turn, and dispose. The scripted model echoes; no persistence.
func BenchmarkSessionCycle(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		e := newEnv(b, setup{})
		deliver, _ := agentcontroller.Key.Get(e.root)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			id := "coder@s" + strconv.Itoa(i)
			h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: id, SessionID: "s" + strconv.Itoa(i), Options: agents.Options{Provider: "scripted"}})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := deliver.Deliver(stdctx.Background(), h.Agent, agentcontroller.Request{Mode: agentcontroller.Followup,
				Source: agentcontroller.Source{Kind: agentcontroller.SourceUser}, RequestID: "r", Content: "hello"}); err != nil {
				b.Fatal(err)
			}
			h.Agent.WhenIdle(stdctx.Background())
			if err := h.Dispose(stdctx.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("controller", func(b *testing.B) {
		e := newEnv(b, setup{})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			s, err := e.ctl.Open(stdctx.Background(), sessions.OpenOptions{Agent: "coder", SessionID: "s" + strconv.Itoa(i), Options: agents.Options{Provider: "scripted"}})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r", Content: "hello"}); err != nil {
				b.Fatal(err)
			}
			e.ctl.Idle(stdctx.Background(), s.ID())
			if err := s.Detach(stdctx.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
