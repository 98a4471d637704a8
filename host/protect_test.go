package host_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/protect"
)

// TestTheHostProtectsWhatItLoads: the config file, the session store and
// the plugin binaries the config names are on the tree's protected list, so the file tools ask before touching
// them even when they sit inside an agent's workspace.
func TestTheHostProtectsWhatItLoads(t *testing.T) {
	ws := t.TempDir()
	file := filepath.Join(ws, "dsh.yaml")
	// A plugin binary in the workspace, named by a preset no agent
	// mounts yet: the next agent that does would run what is there.
	bin := filepath.Join(ws, "bin", "dsh-audit")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// And the script it runs, pinned.
	script := filepath.Join(ws, "bin", "audit.py")
	if err := os.WriteFile(script, []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("plugins:\n  - use: llm.scripted\n    config: {replies: [{text: hi}]}\n  - use: session.jsonl\n    config: {dir: %q}\npresets:\n  audited:\n    - id: audit\n      exec: %q\n      pin: [{file: %q, sha256: %s}]\nagents:\n  - id: a\n    provider: scripted\n", filepath.Join(ws, "sessions"), bin, script, strings.Repeat("ab", 32))
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(file, []byte(text), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{LogOutput: &strings.Builder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	l, err := protect.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	for p, what := range map[string]string{file: "config file", filepath.Join(ws, "sessions", "a", "session.jsonl"): "session store", bin: "plugin binary", script: "pinned by pin:"} {
		if e, ok := l.Match(ws, p); !ok || !strings.Contains(e.What, what) {
			t.Errorf("%s: want it protected as the %s, got %+v %v", p, what, e, ok)
		}
	}
}
