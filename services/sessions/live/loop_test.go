package live_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/session/jsonl"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/hashicorp/go-hclog"
)

// TestTenKBAnswerThroughTheLoop streams a scripted 10 KB answer through
// the real agent loop to an attached client, checks the client's view
// against the log, and measures what the answer costs the persisted
// session now against what recording each chunk in the log cost.
func TestTenKBAnswerThroughTheLoop(t *testing.T) {
	answer := strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit ", 200)[:10*1024]
	dir := t.TempDir()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		p   dshctx.Plugin
		cfg any
	}{
		{jsonl.Plugin, jsonl.Config{Dir: dir}},
		{scripted.Plugin, scripted.Config{Replies: []scripted.Reply{{Text: answer}}}},
		{agentloop.Plugin, agentloop.Config{}},
	} {
		f, err := root.Plugin(p.p, p.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	reg, _ := agents.Key.Get(root)
	hd, err := reg.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a1", SessionID: "s1", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := live.New(hd.Agent, live.Options{Buffer: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.Attach(stdctx.Background(), live.AttachOptions{Name: "tab"})
	if err != nil {
		t.Fatal(err)
	}
	if err := hd.Agent.Followup(llm.Message{Role: llm.RoleUser, Content: "write 10 KB"}); err != nil {
		t.Fatal(err)
	}
	var r replica
	var chunkBytes, chunks int64
	for {
		u := next(t, c)
		if u.Kind == live.KindChunk {
			// What the seed's loop wrote for this chunk: one
			// assistant/chunk event.
			line, _ := json.Marshal(session.Event{Seq: r.last() + 1, Type: session.AssistantChunk, Time: time.Now(),
				Turn: u.Chunk.Turn, Step: u.Chunk.Step, Chunk: &u.Chunk.Chunk})
			chunkBytes += int64(len(line)) + 1
			chunks++
		}
		if err := r.apply(u); err != nil {
			t.Fatal(err)
		}
		if u.Kind == live.KindEvent && u.Event.Type == session.TurnEnd {
			break
		}
	}
	if r.checked != 1 {
		t.Fatal("the streamed answer was not checked against the recorded message")
	}
	sameLog(t, r.events, hd.Agent.Session())
	if err := hd.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(stdctx.Background()); err == nil {
		t.Fatal("the client outlived its agent")
	}
	st, err := os.Stat(filepath.Join(dir, "s1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("10 KB answer in %d chunks: session file %d bytes now; recording its chunks would add %d bytes (%d total)",
		chunks, st.Size(), chunkBytes, st.Size()+chunkBytes)
}
