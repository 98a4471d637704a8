package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests in this file run turns that read and edit files: they need
// tools.files, tools.bash and tools.permission's modes linked into dsh.

const codingReplies = `        - text: "reading "
          tool_calls: [{name: read, arguments: '{"path": "hello.txt"}'}]
        - text: "fixing "
          tool_calls: [{name: edit, arguments: '{"path": "hello.txt", "old": "Helo", "new": "Hello"}'}]
        - text: done
`

// codingConfig is a config whose scripted model reads then edits
// hello.txt, for an agent in mode, working in workspace.
func codingConfig(t *testing.T, mode, workspace string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	text := "plugins:\n  - use: llm.scripted\n    config:\n      replies:\n" + codingReplies +
		"agents:\n  - id: coder\n    provider: scripted\n    preset: " + mode + "\n    workspace: " + workspace + "\nlog:\n  level: warn\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func workspaceWithTypo(t *testing.T) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	file = filepath.Join(dir, "hello.txt")
	if err := os.WriteFile(file, []byte("Helo, world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// TestACodingTurnEditsAFileInItsWorkspace: in the workspace-write mode a
// headless turn reads and edits a file of its workspace — nothing asks for
// a write inside it.
func TestACodingTurnEditsAFileInItsWorkspace(t *testing.T) {
	dir, file := workspaceWithTypo(t)
	o := runDsh(t, "", "run", "--config", codingConfig(t, "workspace-write", dir), "-p", "fix the typo")
	got, _ := os.ReadFile(file)
	if o.code != 0 || string(got) != "Hello, world\n" {
		t.Fatalf("exit %d; hello.txt holds %q\nstdout %q\nstderr %q", o.code, got, o.stdout, o.stderr)
	}
	if !strings.Contains(o.stderr, "→ read") || !strings.Contains(o.stderr, "→ edit") || !strings.Contains(o.stdout, "done") {
		t.Fatalf("stdout %q\nstderr %q", o.stdout, o.stderr)
	}
}

// TestReadOnlyModeLeavesTheFileAlone: the same script under read-only: the
// edit fails as a result the model sees, the turn completes, the file is
// unchanged.
func TestReadOnlyModeLeavesTheFileAlone(t *testing.T) {
	dir, file := workspaceWithTypo(t)
	o := runDsh(t, "", "run", "--config", codingConfig(t, "read-only", dir), "-p", "fix the typo")
	got, _ := os.ReadFile(file)
	if o.code != 0 || string(got) != "Helo, world\n" || !strings.Contains(o.stderr, "← error:") {
		t.Fatalf("exit %d; hello.txt holds %q\nstdout %q\nstderr %q", o.code, got, o.stdout, o.stderr)
	}
}

// TestShippedCoderFixesTheTypo: the walkthrough of config.yaml's coder
// agent, as the README shows it.
func TestShippedCoderFixesTheTypo(t *testing.T) {
	dir, file := workspaceWithTypo(t)
	o := runDsh(t, "", "run", "--config", "../../config.yaml", "--agent", "coder", "--set", "agents.coder.workspace="+dir, "-p", "fix the typo")
	got, _ := os.ReadFile(file)
	if o.code != 0 || string(got) != "Hello, world\n" || !strings.Contains(o.stdout, "Done: hello.txt now says Hello.") {
		t.Fatalf("exit %d; hello.txt holds %q\nstdout %q\nstderr %q", o.code, got, o.stdout, o.stderr)
	}
}
