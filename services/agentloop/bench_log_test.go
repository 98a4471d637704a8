package agentloop_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/session/jsonl"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
)

// answerOf returns a reply of n one-word tokens; the scripted provider
// streams it as n chunks.
func answerOf(n int) scripted.Reply {
	return scripted.Reply{Text: strings.Repeat("token ", n)}
}

// persisted mounts session.jsonl writing into a fresh directory and returns
// the directory.
func (e *env) persisted() string {
	e.t.Helper()
	dir := e.t.(interface{ TempDir() string }).TempDir()
	p, _ := e.root.Plugin(jsonl.Plugin, &jsonl.Config{Dir: dir})
	if err := p.Await(stdctx.Background()); err != nil {
		e.t.Fatal(err)
	}
	return dir
}

// BenchmarkStreamedAnswerFootprint runs turns of a 2,000-token streamed
// answer with session.jsonl and reports what each turn leaves behind: heap
// the live session retains and bytes its file grows by.
func BenchmarkStreamedAnswerFootprint(b *testing.B) {
	const turns = 20
	for b.Loop() {
		e := newEnv(b, []scripted.Reply{answerOf(2000)}, agentloop.Config{})
		dir := e.persisted()
		h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", SessionID: "footprint", Options: agents.Options{Provider: "scripted"}})
		if err != nil {
			b.Fatal(err)
		}
		runTurn(b, h.Agent) // warm up pools and first pages
		before := heapInUse()
		size0 := fileSize(b, filepath.Join(dir, "footprint.jsonl"))
		for range turns {
			runTurn(b, h.Agent)
		}
		after := heapInUse()
		size1 := fileSize(b, filepath.Join(dir, "footprint.jsonl"))
		runtime.KeepAlive(h)
		b.ReportMetric(float64(int64(after)-int64(before))/turns, "B-heap/turn")
		b.ReportMetric(float64(size1-size0)/turns, "B-disk/turn")
		h.Dispose(stdctx.Background())
	}
}

// BenchmarkResume1000Turns resumes a persisted session of 1,000 turns,
// each a 100-token streamed answer: the time to load, replay and start the
// agent.
func BenchmarkResume1000Turns(b *testing.B) {
	e := newEnv(b, []scripted.Reply{answerOf(100)}, agentloop.Config{})
	dir := e.persisted()
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "w", SessionID: "long", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		b.Fatal(err)
	}
	for range 1000 {
		runTurn(b, h.Agent)
	}
	h.Dispose(stdctx.Background())
	size := fileSize(b, filepath.Join(dir, "long.jsonl"))
	b.ReportAllocs()
	for b.Loop() {
		r, err := e.registry.Resume(stdctx.Background(), agents.ResumeOptions{AgentID: "r", ResumeSessionID: "long", Options: agents.Options{Provider: "scripted"}})
		if err != nil {
			b.Fatal(err)
		}
		r.Dispose(stdctx.Background())
	}
	b.ReportMetric(float64(size), "B-file")
}

func fileSize(tb testing.TB, path string) int64 {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Size()
}
