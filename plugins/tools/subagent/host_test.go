package subagent_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

const hostConfig = `
plugins:
  - id: parent-model
    use: llm.scripted
    config:
      name: parent
      replies:
        - tool_calls: [{name: agent, arguments: '{"agent":"reviewer","prompt":"review the change"}'}]
        - text: parent done
  - id: child-model
    use: llm.scripted
    config:
      name: child
      replies:
        - tool_calls: [{name: write, arguments: '{"path":"x","content":"y"}'}]
        - text: reviewed without writing
  - use: session.jsonl
    config: {dir: %s}
  - use: tools.agent
    config:
      max_concurrent: 2
      agents:
        - {name: reviewer, agent: reviewer, presets: [read-only], description: reviews a change}
agents:
  - id: main
    provider: parent
  - id: reviewer
    provider: child
`

// TestThroughTheHost: the child is opened by the host's opener from a
// configured template with a built-in preset (read-only: no write tool),
// and its persisted session is listed under an id linked to the parent's.
// It holds with dsh serve's approver grace too: the child's own answerer
// (its questions go to the parent) is not kept out by a waiting hub.
func TestThroughTheHost(t *testing.T) {
	for _, grace := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprintf("grace=%s", grace), func(t *testing.T) { throughTheHost(t, grace) })
	}
}

func throughTheHost(t *testing.T, grace time.Duration) {
	dir := t.TempDir()
	cfg, err := config.Parse("subagent.yaml", []byte(fmt.Sprintf(hostConfig, dir)), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{LogOutput: &strings.Builder{}, ApproverGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	ctx := stdctx.Background()
	s, err := h.Sessions().Open(ctx, sessions.OpenOptions{Agent: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r1", Content: "get it reviewed"}); err != nil {
		t.Fatal(err)
	}
	idle(t, h.Sessions(), s.ID())
	r := results(t, h.Sessions(), s.ID())["call_1"]
	if r.IsError || r.Content != "reviewed without writing" {
		t.Fatalf("the call's result: %+v", r)
	}
	list, err := h.Sessions().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var child string
	for _, sum := range list {
		if p, ok := session.ParentOf(sum.ID); ok && p == s.ID() {
			child = sum.ID
			if sum.Parent != s.ID() {
				t.Fatalf("the child's summary names parent %q, want %q", sum.Parent, s.ID())
			}
			if !strings.HasPrefix(sum.Agent, "reviewer@") || sum.Title != "review the change" {
				t.Fatalf("the child's summary: %+v", sum)
			}
		}
	}
	if child == "" {
		t.Fatalf("no child session listed: %+v", list)
	}
	// read-only mounts no write tool: the child's call of it failed.
	log, err := os.ReadFile(filepath.Join(dir, child+".jsonl"))
	if err != nil || !strings.Contains(string(log), `unknown tool \"write\"`) {
		t.Fatalf("the child's log shows no refused write (%v):\n%s", err, log)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
