package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompactCommand: /compact asks for a compaction, the next prompt runs
// it, and the session shows what it did.
func TestCompactCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(`plugins:
  - use: llm.scripted
  - use: session.jsonl
    config: {dir: `+filepath.Join(dir, "sessions")+`}
  - use: session.compact
agents:
  - id: main
    provider: scripted
    session: main
log:
  level: warn
`), 0o644)
	tty, cmd, scr, pos := startInteractive(t, cfg)
	// Asked for before anything is said, it has nothing to summarize and
	// says so rather than leaving the person waiting.
	io.WriteString(tty, "/compact\r")
	pos = scr.waitFor(t, pos, "(the history is compacted when the next prompt is sent)")
	io.WriteString(tty, "hello there\r")
	pos = scr.waitFor(t, pos, "(not compacted: there is nothing to summarize")
	pos = scr.waitFor(t, pos, "You said: hello there")
	pos = scr.waitFor(t, pos, "> ")
	io.WriteString(tty, "/compact\r")
	pos = scr.waitFor(t, pos, "(the history is compacted when the next prompt is sent)")
	io.WriteString(tty, "and now\r")
	pos = scr.waitFor(t, pos, "(compacting 2 messages, about ")
	pos = scr.waitFor(t, pos, "(compacted 1 turn (2 messages) into ")
	scr.waitFor(t, pos, "You said: and now")
	leaveWithCtrlD(t, tty, cmd, scr)
}

// TestRunPrintsCompactions: a session that outgrows a
// small window is compacted across runs, stderr says so and the log holds
// the event the next run resumes from.
func TestRunPrintsCompactions(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(`plugins:
  - use: llm.scripted
  - use: session.jsonl
    config: {dir: `+filepath.Join(dir, "sessions")+`}
  - use: session.compact
    config: {window: 300}
agents:
  - id: main
    provider: scripted
    session: main
log:
  level: warn
`), 0o644)
	prompt := "a prompt long enough to fill a small window quickly, repeated: lorem ipsum dolor sit amet, consectetur adipiscing elit"
	seen := false
	for i := range 4 {
		o := runDsh(t, "", "run", "--config", cfg, "-p", prompt)
		if o.code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, o.code, o.stderr)
		}
		if strings.Contains(o.stderr, "(compacted ") {
			seen = true
		}
	}
	if !seen {
		t.Fatal("four runs in a 300-token window printed no compaction")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "sessions", "main.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"type":"history/compacted"`) {
		t.Fatal("the session log holds no compaction")
	}
}
