package nats_test

import (
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/plugins/session/jsonl"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkTurnFlush measures what a session store costs an agent once a
// turn: appending the turn's events (start, the user's message, a 1 KB
// answer, end) and flushing them, which returns once they are durable —
// fsynced by session.jsonl, acked by JetStream for session.nats (on one
// server, and on three servers keeping three replicas). The servers run
// in this process, so allocations count theirs too.
//
//	go test -run '^$' -bench TurnFlush -benchtime 2s ./plugins/session/nats/
func BenchmarkTurnFlush(b *testing.B) {
	b.Run("jsonl", func(b *testing.B) {
		benchTurns(b, jsonl.Plugin, &jsonl.Config{Dir: b.TempDir()})
	})
	b.Run("nats-1-node", func(b *testing.B) {
		benchTurns(b, natsplugin.Plugin, pluginConfig(natstest.Single(b).ClientURL()))
	})
	b.Run("nats-3-nodes-R3", func(b *testing.B) {
		benchTurns(b, natsplugin.Plugin, clusterConfig(natstest.Start(b, 3).URL(0)))
	})
}

func benchTurns(b *testing.B, plugin dshctx.Plugin, cfg any) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(b, root)
	if err := core.Mount(root); err != nil {
		b.Fatal(err)
	}
	f, _ := root.Plugin(plugin, cfg)
	if err := f.Await(bg); err != nil {
		b.Fatal(err)
	}
	st, err := session.Key.Get(root)
	if err != nil {
		b.Fatal(err)
	}
	s := open(b, root, st, "bench")
	answer := strings.Repeat("All work and no play makes Jack a dull boy. ", 1024/44+1)[:1024]
	b.ReportAllocs()
	b.ResetTimer()
	for n := 1; n <= b.N; n++ {
		s.Append(bg, session.Event{Type: session.TurnStart, Turn: n})
		s.Append(bg, session.Event{Type: session.UserMessage, Turn: n, Message: &llm.Message{Role: llm.RoleUser, Content: "What does the log say?"}})
		s.Append(bg, session.Event{Type: session.AssistantMessage, Turn: n, Message: &llm.Message{Role: llm.RoleAssistant, Content: answer}, Finish: llm.FinishStop})
		s.Append(bg, session.Event{Type: session.TurnEnd, Turn: n, Reason: "completed"})
		if err := s.Flush(bg); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := st.Close(s); err != nil {
		b.Fatal(err)
	}
}
