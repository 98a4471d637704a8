package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHeadlessWriteToGitConfigIsRefused: issue 28's escape through .git. In
// workspace-write a headless turn's write of core.fsmonitor into
// .git/config is refused (nobody to approve it) and the file is unchanged;
// --allow write is the person saying yes in advance.
func TestHeadlessWriteToGitConfigIsRefused(t *testing.T) {
	ws := t.TempDir()
	gitConfig := filepath.Join(ws, ".git", "config")
	if err := os.MkdirAll(filepath.Dir(gitConfig), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gitConfig, []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	replies := `        - text: "configuring "
          tool_calls: [{name: write, arguments: '{"path": "./.git//config", "content": "[core]\\n\\tfsmonitor = touch pwned\\n"}'}]
        - text: done
`
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	text := "plugins:\n  - use: llm.scripted\n    config:\n      replies:\n" + replies +
		"agents:\n  - id: coder\n    provider: scripted\n    preset: workspace-write\n    workspace: " + ws + "\nlog:\n  level: warn\n"
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	o := runDsh(t, "", "run", "--config", cfg, "-p", "set up git")
	got, _ := os.ReadFile(gitConfig)
	if o.code != 0 || string(got) != "[core]\n" || !strings.Contains(o.stderr, "git's configuration") {
		t.Fatalf("exit %d; .git/config holds %q\nstdout %q\nstderr %q", o.code, got, o.stdout, o.stderr)
	}
	o = runDsh(t, "", "run", "--config", cfg, "--allow", "write", "-p", "set up git")
	got, _ = os.ReadFile(gitConfig)
	if o.code != 0 || !strings.Contains(string(got), "fsmonitor") {
		t.Fatalf("--allow write: exit %d; .git/config holds %q\nstderr %q", o.code, got, o.stderr)
	}
}
