package nats_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugins/session/jsonl"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkTurnFlush measures what a session store costs an agent once a
// turn: appending the turn's events (start, the user's message, a 1 KB
// answer, end) and flushing them, which returns once they are durable —
// fsynced by session.jsonl, acked by JetStream for session.nats (on one
// server, and on three servers keeping three replicas). The servers run
// in this process, so allocations and cpu-ns/op count theirs too.
//
// For session.nats, floor-ns/op (floor-cpu-ns/op) is, in the same run on
// the same servers, the least JetStream can do with a turn's bytes: the
// same four messages published asynchronously to a stream of the same
// replicas, with one wait for all four acks; x-floor and cpu-x-floor are
// the flush beside it.
//
//	go test -run '^$' -bench TurnFlush -benchtime 2s -count 3 ./plugins/session/nats/
func BenchmarkTurnFlush(b *testing.B) {
	b.Run("jsonl", func(b *testing.B) {
		benchTurns(b, jsonl.Plugin, &jsonl.Config{Dir: b.TempDir()}, nil)
	})
	b.Run("nats-1-node", func(b *testing.B) {
		cfg := pluginConfig(natstest.Single(b).ClientURL())
		benchTurns(b, natsplugin.Plugin, cfg, cfg)
	})
	b.Run("nats-3-nodes-R3", func(b *testing.B) {
		cfg := clusterConfig(natstest.Start(b, 3).URL(0))
		benchTurns(b, natsplugin.Plugin, cfg, cfg)
	})
}

// turnEvents are the events of turn n as the benchmark appends them.
func turnEvents(n int) []session.Event {
	answer := strings.Repeat("All work and no play makes Jack a dull boy. ", 1024/44+1)[:1024]
	return []session.Event{
		{Type: session.TurnStart, Turn: n},
		{Type: session.UserMessage, Turn: n, Message: &llm.Message{Role: llm.RoleUser, Content: "What does the log say?"}},
		{Type: session.AssistantMessage, Turn: n, Message: &llm.Message{Role: llm.RoleAssistant, Content: answer}, Finish: llm.FinishStop},
		{Type: session.TurnEnd, Turn: n, Reason: "completed"},
	}
}

func benchTurns(b *testing.B, plugin dshctx.Plugin, cfg any, floorOf *natsplugin.Config) {
	var floorWall, floorCPU time.Duration
	if floorOf != nil {
		floorWall, floorCPU = publishFloor(b, floorOf, max(200, min(b.N, 2000)))
	}
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
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), testkit.CPUTime()
	for n := 1; n <= b.N; n++ {
		for _, e := range turnEvents(n) {
			s.Append(bg, e)
		}
		if err := s.Flush(bg); err != nil {
			b.Fatal(err)
		}
	}
	wall, cpu := time.Since(start)/time.Duration(b.N), (testkit.CPUTime()-cpu0)/time.Duration(b.N)
	b.StopTimer()
	b.ReportMetric(float64(cpu), "cpu-ns/op")
	if floorOf != nil {
		b.ReportMetric(float64(floorWall), "floor-ns/op")
		b.ReportMetric(float64(floorCPU), "floor-cpu-ns/op")
		b.ReportMetric(float64(wall)/float64(floorWall), "x-floor")
		b.ReportMetric(float64(cpu)/float64(floorCPU), "cpu-x-floor")
	}
	if err := st.Close(s); err != nil {
		b.Fatal(err)
	}
}

// publishFloor times n turns' worth of bare JetStream publishes through
// cfg's server: a stream of its own with cfg's replicas, the four events
// of a turn as JSON published asynchronously, one wait for their acks.
func publishFloor(b *testing.B, cfg *natsplugin.Config, n int) (wall, cpu time.Duration) {
	b.Helper()
	nc, err := natsgo.Connect(cfg.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	name := cfg.Stream + "_FLOOR"
	if _, err := js.CreateStream(bg, jetstream.StreamConfig{Name: name, Subjects: []string{"floor." + name},
		Storage: jetstream.FileStorage, Replicas: max(cfg.Replicas, 1)}); err != nil {
		b.Fatal(err)
	}
	defer js.DeleteStream(bg, name)
	turn := func(i int) {
		for _, e := range turnEvents(i) {
			data, err := json.Marshal(e)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := js.PublishAsync("floor."+name, data); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(10 * time.Second):
			b.Fatal("the floor's publishes were not acked within 10s")
		}
	}
	turn(0)
	start, cpu0 := time.Now(), testkit.CPUTime()
	for i := range n {
		turn(i + 1)
	}
	return time.Since(start) / time.Duration(n), (testkit.CPUTime() - cpu0) / time.Duration(n)
}
