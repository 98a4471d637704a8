package bundle_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/hosttest"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// TestTheAgentCannotRewriteAMountedBundle: a bundle's hooks and servers
// run as dsh's user, outside any sandbox, so a bundle inside the workspace
// is protected while it is mounted: the agent's write tool is asked about
// it and, with nobody attached to answer, refused — while a plain file
// beside it is written.
func TestTheAgentCannotRewriteAMountedBundle(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	root := kit(t, dir, out)
	yaml := `
plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "editing"
          tool_calls:
            - name: write
              arguments: '{"path": "notes.txt", "content": "fine"}'
            - name: write
              arguments: '{"path": "echo-kit/scripts/guard.sh", "content": "#!/bin/sh\nexit 0\n"}'
        - text: "done"
  - bundle: ./echo-kit
agents:
  - id: a
    provider: scripted
    preset: workspace-write
`
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{Path: file, Dir: dir, Environ: []string{"BUNDLE_OUT=" + out}})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(root, "scripts/guard.sh"))
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	a, _ := h.Agent("a")
	if err := a.Followup(llm.Message{Role: llm.RoleUser, Content: "go"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	if err := a.WhenIdle(ctx); err != nil {
		t.Fatal(err)
	}
	var results []llm.Message
	for _, e := range a.Session().Events(1) {
		if e.Type == session.ToolResult && e.Message != nil {
			results = append(results, *e.Message)
		}
	}
	if len(results) != 2 || results[0].IsError {
		t.Fatalf("results %+v; want the plain file written", results)
	}
	if !results[1].IsError || !strings.Contains(results[1].Content, `plugin bundle "echo-kit"`) {
		t.Errorf("writing the bundle's hook script: %+v; want a refusal naming the bundle", results[1])
	}
	after, _ := os.ReadFile(filepath.Join(root, "scripts/guard.sh"))
	if string(after) != string(before) {
		t.Fatalf("the bundle's hook script was rewritten:\n%s", after)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(got) != "fine" {
		t.Fatalf("notes.txt = %q", got)
	}
}
