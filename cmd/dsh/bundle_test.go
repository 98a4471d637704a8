package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheckShowsWhatABundleMounts: dsh config check lists each entry
// a bundle became, marked with the bundle, and what it left out; dsh run
// expands the bundle's command and logs the part it does not apply.
func TestConfigCheckShowsWhatABundleMounts(t *testing.T) {
	dir := t.TempDir()
	for path, content := range map[string]string{
		"kit/.claude-plugin/plugin.json": `{"name": "kit", "version": "1.0.0"}`,
		"kit/commands/review.md":         "---\ndescription: Review a part of the code\n---\nReview $ARGUMENTS carefully.\n",
		"kit/agents/critic.md":           "---\nname: critic\ndescription: criticises\ntools: Read, Grep\n---\nYou criticise.\n",
		"config.yaml":                    "plugins:\n  - use: llm.scripted\n  - bundle: ./kit\nagents:\n  - id: main\n    provider: scripted\n",
	} {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "config.yaml")
	o := runDsh(t, "", "config", "check", "--config", cfg)
	if o.code != 0 {
		t.Fatalf("check: %d %q", o.code, o.stderr)
	}
	for _, want := range []string{
		`kit/commands (use prompt.commands) (from bundle "kit")`,
		"bundles:\n  plugins[1]: bundle \"kit\" ",
		"    mounts: kit/protect, kit/commands, kit/agents\n",
		`agent "critic": tools: not applied`,
	} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("config check lacks %q:\n%s", want, o.stdout)
		}
	}
	o = runDsh(t, "", "run", "--config", cfg, "-p", "/review the parser")
	if o.code != 0 || !strings.Contains(o.stdout, "Review the parser carefully.") {
		t.Fatalf("run: %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	if !strings.Contains(o.stderr, "part of a bundle is not mounted") || !strings.Contains(o.stderr, "critic") {
		t.Fatalf("the agent's tools left out are not logged:\n%s", o.stderr)
	}
}
