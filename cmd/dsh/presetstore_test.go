package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// presetStoreConfig writes a config whose only session store is in a
// preset the agent mounts, at its root none.
func presetStoreConfig(t *testing.T, dir, session string) string {
	t.Helper()
	cfg := "plugins:\n  - use: llm.scripted\n    config:\n      replies:\n        - text: one\n        - text: two\n" +
		"presets:\n  keep:\n    - use: session.jsonl\n      config: {dir: " + filepath.Join(dir, "sessions") + "}\n" +
		"agents:\n  - id: main\n    provider: scripted\n    preset: keep\n" + session + "log:\n  level: warn\n"
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAStoreInAPresetPersists: with session.jsonl only in the agent's
// preset, dsh run says the session is stored and how to continue it; dsh
// sessions lists, shows and deletes it; --session and --continue resume it.
func TestAStoreInAPresetPersists(t *testing.T) {
	dir := t.TempDir()
	cfg := presetStoreConfig(t, dir, "")
	o := runDsh(t, "", "run", "--config", cfg, "--json", "-p", "first")
	if o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	var first opened
	if err := json.Unmarshal([]byte(strings.SplitN(o.stdout, "\n", 2)[0]), &first); err != nil || first.SessionID == "" {
		t.Fatalf("no session id in %q: %v", o.stdout, err)
	}
	id := first.SessionID
	if strings.Contains(o.stderr, "not stored") || !strings.Contains(o.stderr, "continue it with: dsh run --session "+id) {
		t.Fatalf("the run does not say its session is stored: %q", o.stderr)
	}

	o = runDsh(t, "", "sessions", "list", "--config", cfg)
	if o.code != 0 || !strings.Contains(o.stdout, id) {
		t.Fatalf("list: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}

	o = runDsh(t, "", "run", "--config", cfg, "--session", id, "--json", "-p", "second")
	var again opened
	if o.code != 0 || json.Unmarshal([]byte(strings.SplitN(o.stdout, "\n", 2)[0]), &again) != nil || again.SessionID != id || !again.Resumed {
		t.Fatalf("--session: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	o = runDsh(t, "", "run", "--config", cfg, "--continue", "--json", "-p", "third")
	if o.code != 0 || json.Unmarshal([]byte(strings.SplitN(o.stdout, "\n", 2)[0]), &again) != nil || again.SessionID != id || !again.Resumed {
		t.Fatalf("--continue: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	o = runDsh(t, "", "sessions", "show", "--config", cfg, id)
	if o.code != 0 || !strings.Contains(o.stdout, "turns    3") {
		t.Fatalf("show: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}

	if o = runDsh(t, "", "sessions", "rm", "--config", cfg, id); o.code != 0 {
		t.Fatalf("rm: exit %d: %s", o.code, o.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions", id+".jsonl")); !os.IsNotExist(err) {
		t.Fatalf("the log is still there: %v", err)
	}
	if o = runDsh(t, "", "sessions", "show", "--config", cfg, id); o.code != exitNotFound {
		t.Fatalf("show after rm: exit %d: %s", o.code, o.stderr)
	}
}

// TestASessionKeyWithAStoreInAPreset: config check accepts session: on an
// agent whose preset holds the store, and each run continues that session.
func TestASessionKeyWithAStoreInAPreset(t *testing.T) {
	dir := t.TempDir()
	cfg := presetStoreConfig(t, dir, "    session: kept\n")
	if o := runDsh(t, "", "config", "check", "--config", cfg); o.code != 0 {
		t.Fatalf("config check: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	for i := range 2 {
		o := runDsh(t, "", "run", "--config", cfg, "-p", "hello")
		if o.code != 0 || o.stdout != "one\n" || !strings.Contains(o.stderr, "continue it with: dsh run --session kept") {
			t.Fatalf("run %d: exit %d\nstdout %q\nstderr %q", i, o.code, o.stdout, o.stderr)
		}
	}
	o := runDsh(t, "", "sessions", "show", "--config", cfg, "kept")
	if o.code != 0 || !strings.Contains(o.stdout, "turns    2") {
		t.Fatalf("show: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
}
