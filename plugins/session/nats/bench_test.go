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
// the flush beside it. The floor runs untimed between chunks of
// benchFloorChunk turns, as many turns as the benchmark, so a load that
// comes and goes on a shared machine weighs on both alike.
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

// BenchmarkSpacedTurnFlush is BenchmarkTurnFlush's R3 case with the turns
// spacedBy apart, as an agent's steps are (a model call between two):
// back to back, a session's index puts are coalesced (index.go) and a
// turn costs little more than its batch; spaced, each turn pays its
// index put. The floor's turns are spaced alike, and wall time is mostly
// the spacing. cpu-ns/op and floor-cpu-ns/op count the idle servers' CPU
// during the spacing, which idle-cpu-ns/op measures alone in the same run
// (as long a sleep); net-cpu-x-floor is the ratio with it taken off both.
//
//	go test -run '^$' -bench SpacedTurnFlush -benchtime 100x -count 3 ./plugins/session/nats/
func BenchmarkSpacedTurnFlush(b *testing.B) {
	cfg := clusterConfig(natstest.Start(b, 3).URL(0))
	benchSpaced(b, natsplugin.Plugin, cfg, cfg, spacedBy)
}

// spacedBy is more than the index's indexEvery (50 ms).
const spacedBy = 60 * time.Millisecond

func benchTurns(b *testing.B, plugin dshctx.Plugin, cfg any, floorOf *natsplugin.Config) {
	benchSpaced(b, plugin, cfg, floorOf, 0)
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

func benchSpaced(b *testing.B, plugin dshctx.Plugin, cfg any, floorOf *natsplugin.Config, spacing time.Duration) {
	var fl *floor
	if floorOf != nil {
		fl = startFloor(b, floorOf, spacing)
		defer fl.close()
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
	var floorWall, floorCPU, idleCPU, wall, cpu time.Duration
	size := benchFloorChunk
	if spacing > 0 {
		size = 20
	}
	b.ReportAllocs()
	b.ResetTimer()
	for n := 1; n <= b.N; {
		chunk := min(b.N-n+1, size)
		if fl != nil {
			b.StopTimer()
			w, c := fl.turns(b, chunk)
			floorWall, floorCPU = floorWall+w, floorCPU+c
			if spacing > 0 {
				// What the process spends doing nothing as long.
				cpu0 := testkit.CPUTime()
				time.Sleep(time.Duration(chunk) * spacing)
				idleCPU += testkit.CPUTime() - cpu0
			}
			b.StartTimer()
		}
		start, cpu0 := time.Now(), testkit.CPUTime()
		for end := n + chunk; n < end; n++ {
			for _, e := range turnEvents(n) {
				s.Append(bg, e)
			}
			if err := s.Flush(bg); err != nil {
				b.Fatal(err)
			}
			if spacing > 0 {
				time.Sleep(spacing)
			}
		}
		wall, cpu = wall+time.Since(start), cpu+testkit.CPUTime()-cpu0
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d) / float64(b.N) }
	b.ReportMetric(per(cpu), "cpu-ns/op")
	if fl != nil {
		b.ReportMetric(per(floorWall), "floor-ns/op")
		b.ReportMetric(per(floorCPU), "floor-cpu-ns/op")
		b.ReportMetric(per(wall)/per(floorWall), "x-floor")
		b.ReportMetric(per(cpu)/per(floorCPU), "cpu-x-floor")
		if spacing > 0 {
			b.ReportMetric(per(idleCPU), "idle-cpu-ns/op")
			b.ReportMetric((per(cpu)-per(idleCPU))/(per(floorCPU)-per(idleCPU)), "net-cpu-x-floor")
		}
	}
	if err := st.Close(s); err != nil {
		b.Fatal(err)
	}
}

// benchFloorChunk is how many turns BenchmarkTurnFlush times between two
// chunks of its floor.
const benchFloorChunk = 200

// floor publishes turns' worth of bare JetStream messages through a
// config's server: a stream of its own with its replicas, the four events
// of a turn as JSON published asynchronously, one wait for their acks.
type floor struct {
	nc   *natsgo.Conn
	js   jetstream.JetStream
	name string
	n    int
	// spacing is the pause after each turn.
	spacing time.Duration
}

func startFloor(b *testing.B, cfg *natsplugin.Config, spacing time.Duration) *floor {
	b.Helper()
	nc, err := natsgo.Connect(cfg.URL)
	if err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		b.Fatal(err)
	}
	name := cfg.Stream + "_FLOOR"
	if _, err := js.CreateStream(bg, jetstream.StreamConfig{Name: name, Subjects: []string{"floor." + name},
		Storage: jetstream.FileStorage, Replicas: max(cfg.Replicas, 1)}); err != nil {
		nc.Close()
		b.Fatal(err)
	}
	f := &floor{nc: nc, js: js, name: name, spacing: spacing}
	f.turns(b, 1) // the ack subscription
	return f
}

// turns publishes n turns; it returns their wall and CPU time.
func (f *floor) turns(b *testing.B, n int) (wall, cpu time.Duration) {
	start, cpu0 := time.Now(), testkit.CPUTime()
	for range n {
		f.n++
		for _, e := range turnEvents(f.n) {
			data, err := json.Marshal(e)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.js.PublishAsync("floor."+f.name, data); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-f.js.PublishAsyncComplete():
		case <-time.After(10 * time.Second):
			b.Fatal("the floor's publishes were not acked within 10s")
		}
		if f.spacing > 0 {
			time.Sleep(f.spacing)
		}
	}
	return time.Since(start), testkit.CPUTime() - cpu0
}

func (f *floor) close() {
	f.js.DeleteStream(bg, f.name)
	f.nc.Close()
}
