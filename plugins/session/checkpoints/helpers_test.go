package checkpoints_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/natstest"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

func TestMain(m *testing.M) { natstest.VerifyTestMain(m) }

// rig is a host whose agent "a" works in ws with the file tools, bash
// and, when asked, session.checkpoints; its session is open, so its tool
// calls run through the tools service as a step's would.
type rig struct {
	h     *host.Host
	ws    string
	scope *dshctx.Context
	agent agents.Agent
	svc   *tools.Service
	id    string
}

func newRig(tb testing.TB, ws string, checkpoints bool, extra string, replies ...scripted.Reply) *rig {
	tb.Helper()
	persist := "  - use: session.jsonl\n    config: {dir: " + filepath.Join(tb.TempDir(), "sessions") + "}\n"
	return newRigOn(tb, persist, ws, checkpoints, extra, replies...)
}

// newRigOn is newRig with persist, the persistence plugin's entry.
func newRigOn(tb testing.TB, persist, ws string, checkpoints bool, extra string, replies ...scripted.Reply) *rig {
	tb.Helper()
	sc, _ := json.Marshal(scripted.Config{Replies: replies})
	cp := ""
	if checkpoints {
		cp = "    - use: session.checkpoints\n" + extra
	}
	yaml := "plugins:\n  - use: llm.scripted\n    config: " + string(sc) + "\n" + persist +
		"presets:\n  p:\n    - use: tools.files\n    - use: tools.bash\n    - use: tools.permission\n      config: {allow: [bash, write, edit]}\n" + cp +
		"agents:\n  - id: a\n    provider: scripted\n    preset: p\n    workspace: " + ws + "\n"
	cfg, err := config.Parse("rig.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		tb.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
		defer cancel()
		h.Close(ctx)
	})
	// A stored session s is resumed (a second rig on the same store).
	ctx := stdctx.Background()
	in, err := h.Sessions().Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "a", AgentID: "a", SessionID: "s"}})
	if err != nil {
		tb.Fatal(err)
	}
	reg, err := agents.Key.Get(h.Root())
	if err != nil {
		tb.Fatal(err)
	}
	a, ok := reg.Get(in.AgentID)
	if !ok {
		tb.Fatalf("no agent %q", in.AgentID)
	}
	svc, err := tools.Key.Get(h.Root())
	if err != nil {
		tb.Fatal(err)
	}
	return &rig{h: h, ws: ws, scope: a.Context(), agent: a, svc: svc, id: in.ID}
}

// call runs one tool call of the agent, failing on an error result.
func (r *rig) call(tb testing.TB, name, args string) string {
	tb.Helper()
	res, err := r.svc.Execute(stdctx.Background(), r.scope, tools.Call{AgentID: r.agent.ID(), ID: "c", Name: name, Arguments: []byte(args), Workspace: r.ws})
	if err != nil || res.IsError {
		tb.Fatalf("%s %s: %v %s", name, args, err, res.Content)
	}
	return res.Content
}

// workspace makes n files of 1 KiB under dir, 100 to a folder, dated an
// hour ago (as files a session finds are).
func workspace(tb testing.TB, n int) string {
	tb.Helper()
	ws := tb.TempDir()
	data := make([]byte, 1024)
	old := time.Now().Add(-time.Hour)
	for i := range n {
		for j := range data {
			data[j] = byte('a' + (i+j)%26)
		}
		dir := filepath.Join(ws, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				tb.Fatal(err)
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("f%05d.txt", i))
		if err := os.WriteFile(p, append([]byte(fmt.Sprintf("file %05d\n", i)), data...), 0o644); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			tb.Fatal(err)
		}
	}
	return ws
}

// prompt runs one turn and waits for its end.
func (r *rig) prompt(tb testing.TB, text string) {
	tb.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), time.Minute)
	defer cancel()
	turn, err := r.h.Sessions().Prompt(ctx, r.id, sessions.PromptRequest{Content: text})
	if err != nil {
		tb.Fatal(err)
	}
	if res, err := turn.Wait(ctx); err != nil || !res.Ran() {
		tb.Fatalf("turn %q: %+v %v", text, res, err)
	}
}

// rewind rewinds the rig's session.
func (r *rig) rewind(req sessions.RewindRequest) (sessions.RewindResult, error) {
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), time.Minute)
	defer cancel()
	return r.h.Sessions().Rewind(ctx, r.id, req)
}

// checkpoints returns the checkpoint events of the rig's session.
func (r *rig) checkpoints(tb testing.TB) []session.Event {
	tb.Helper()
	evs, err := r.h.Sessions().History(stdctx.Background(), r.id, 0)
	if err != nil {
		tb.Fatal(err)
	}
	var out []session.Event
	for _, e := range evs {
		if e.Type == session.Checkpointed {
			out = append(out, e)
		}
	}
	return out
}

// checkpointsPrecedeResults fails unless every checkpoint event of the
// rig's session comes right before its call's result, in the same turn
// and step: the driver appends what session/record handed over before the
// result, so a rewind to the step finds the checkpoint in it.
func (r *rig) checkpointsPrecedeResults(tb testing.TB) {
	tb.Helper()
	evs, err := r.h.Sessions().History(stdctx.Background(), r.id, 0)
	if err != nil {
		tb.Fatal(err)
	}
	for i, e := range evs {
		if e.Type != session.Checkpointed {
			continue
		}
		if i+1 == len(evs) {
			tb.Fatalf("checkpoint of %s (seq %d) is the last event: its call has no result after it", e.Checkpoint.CallID, e.Seq)
		}
		n := evs[i+1]
		if n.Type != session.ToolResult || n.Message == nil || n.Message.ToolCallID != e.Checkpoint.CallID || n.Turn != e.Turn || n.Step != e.Step {
			tb.Fatalf("checkpoint of %s at %d.%d (seq %d) is followed by %s at %d.%d, not by its call's result", e.Checkpoint.CallID, e.Turn, e.Step, e.Seq, n.Type, n.Turn, n.Step)
		}
	}
}

func read(tb testing.TB, ws, p string) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(ws, p))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(data)
}

// close closes the rig's host, so another may resume its session.
func (r *rig) close(tb testing.TB) {
	tb.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if err := r.h.Close(ctx); err != nil {
		tb.Fatal(err)
	}
}
