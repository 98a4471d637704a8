package live_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// BenchmarkChunkNoHub is the baseline: emitting a chunk nobody listens to.
func BenchmarkChunkNoHub(b *testing.B) {
	a := newAgent(b)
	c := llm.Chunk{Kind: llm.ChunkText, Text: "word "}
	b.ReportAllocs()
	for range b.N {
		a.emit(1, 1, "m", c)
	}
}

// BenchmarkChunkFanOut is the agent's cost of one stream chunk with 0, 1
// and 10 attached clients (one reader goroutine each keeps them drained).
func BenchmarkChunkFanOut(b *testing.B) {
	for _, n := range []int{0, 1, 10} {
		b.Run(map[int]string{0: "clients=0", 1: "clients=1", 10: "clients=10"}[n], func(b *testing.B) {
			a := newAgent(b)
			h := newHub(b, a, live.Options{Buffer: 1 << 20})
			a.append(session.Event{Type: session.TurnStart, Turn: 1})
			done := make(chan struct{}, n)
			for range n {
				c, err := h.Attach(stdctx.Background(), live.AttachOptions{AfterSeq: 1})
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					defer func() { done <- struct{}{} }()
					for {
						if _, err := c.Next(stdctx.Background()); err != nil {
							return
						}
					}
				}()
			}
			c := llm.Chunk{Kind: llm.ChunkText, Text: "word "}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%4096 == 0 {
					// A new message now and then, as steps do, so the
					// assembled text stays the size of an answer.
					m := llm.Message{Role: llm.RoleAssistant, ID: "m"}
					a.append(session.Event{Type: session.AssistantMessage, Message: &m})
				}
				a.emit(1, 1, "m", c)
			}
			b.StopTimer()
			h.Close()
			for range n {
				<-done
			}
		})
	}
}
