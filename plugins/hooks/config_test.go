package hooks_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugins/hooks"
	"github.com/dsh-go/dsh/services/tools"
)

// TestASettingsFileLoadsAsItIs: a Claude Code settings file with other
// keys and events dsh lacks is read; the events it lacks are logged.
func TestASettingsFileLoadsAsItIs(t *testing.T) {
	r := newRig(t)
	deny := r.script("deny.sh", `echo "from the file" >&2; exit 2`)
	settings := map[string]any{
		"permissions": map[string]any{"allow": []any{"Bash(ls:*)"}},
		"hooks": map[string]any{
			"PreToolUse":       []any{hook("Bash", deny, 5)},
			"PermissionDenied": []any{hook("", "notify-send hi", 0)},
			"PostToolUse":      []any{map[string]any{"matcher": "Write", "hooks": []any{map[string]any{"type": "prompt", "prompt": "check it"}}}},
		},
	}
	data, _ := json.Marshal(settings)
	file := filepath.Join(r.dir, "settings.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}, map[string]any{"use": "hooks.command", "config": map[string]any{"files": []any{file}}}},
		"agents":  []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash")
	if v := r.approve("main", "bash", `{"command":"ls"}`); v.Decision != tools.Deny || v.Reason != "from the file" {
		t.Fatalf("got %+v", v)
	}
	contains(t, "log", r.logs.String(), "hooks.PermissionDenied: dsh has no PermissionDenied event; these hooks do not run")
	contains(t, "log", r.logs.String(), `type "prompt" is not supported (only command hooks run); skipped`)
	// Claude Code applies the file's permission rules to every call; the
	// hooks plugin does not, and says so rather than let a rule look
	// applied.
	contains(t, "log", r.logs.String(), file+": permissions: 1 allow (Bash(ls:*)) rules are not applied")
}

func TestConfigProblemsAreReportedAtCheck(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"hooks": [`), 0o644)
	cases := []struct {
		cfg  hooks.Config
		want string
	}{
		{hooks.Config{Hooks: map[string][]hooks.Group{"PreToolUze": nil}}, "hooks.PreToolUze: unknown event; expected one of PreToolUse, PostToolUse, PostToolUseFailure, UserPromptSubmit, Stop, SessionStart"},
		{hooks.Config{Hooks: map[string][]hooks.Group{"PreToolUse": {{Matcher: "Bash(", Hooks: []hooks.Hook{{Command: "x"}}}}}}, `hooks.PreToolUse[0].matcher: "Bash(" is not a regular expression`},
		{hooks.Config{Hooks: map[string][]hooks.Group{"Stop": {{Hooks: []hooks.Hook{{Command: " "}}}}}}, "hooks.Stop[0].hooks[0].command: empty"},
		{hooks.Config{Hooks: map[string][]hooks.Group{"Stop": {{Hooks: []hooks.Hook{{Command: "x", Timeout: -1}}}}}}, "hooks.Stop[0].hooks[0].timeout: -1"},
		{hooks.Config{Hooks: map[string][]hooks.Group{"Stop": {{Hooks: []hooks.Hook{{Command: "x", Timeout: 1e10}}}}}}, "hooks.Stop[0].hooks[0].timeout: 1e+10 seconds is more than the most a hook may run (24h0m0s); give at most 86400"},
		{hooks.Config{Files: []string{filepath.Join(dir, "nope.json")}}, "nope.json): no such file or directory; relative paths start from the directory dsh was started in"},
		{hooks.Config{Files: []string{bad}}, "bad.json: not a hooks file"},
	}
	for _, c := range cases {
		d := hooks.Config{}.Defaults()
		d.Hooks, d.Files = c.cfg.Hooks, c.cfg.Files
		err := d.Validate()
		if !errs.HasCode(err, errs.InvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestConfigCheckNamesTheEntry: the problem lands on the entry's line.
func TestConfigCheckNamesTheEntry(t *testing.T) {
	doc := `
plugins:
  - use: hooks.command
    config:
      hooks:
        PreToolUse:
          - matcher: "Bash("
            hooks: [{type: command, command: "true"}]
agents:
  - id: main
    provider: scripted
`
	_, err := config.Parse("config.yaml", []byte(doc), config.LoadOptions{Environ: []string{}})
	if err == nil || !strings.Contains(err.Error(), "config.yaml:") || !strings.Contains(err.Error(), `"Bash(" is not a regular expression`) {
		t.Fatalf("got %v", err)
	}
}

// TestTheExampleBlocksRecursiveRm loads examples/hooks/hooks.json with the
// repository as the workspace, as docs/hooks.md shows.
func TestTheExampleBlocksRecursiveRm(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t)
	r.ws = repo
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"files": []any{filepath.Join(repo, "examples/hooks/hooks.json")}}}},
		"agents": []any{map[string]any{"id": "main", "provider": "scripted"}},
	})
	r.registerFake("bash")
	v := r.approve("main", "bash", `{"command":"ls && rm -rf build"}`)
	if v.Decision != tools.Deny || !strings.Contains(v.Reason, "recursive rm is blocked") {
		t.Fatalf("got %+v", v)
	}
	if v := r.approve("main", "bash", `{"command":"rm notes.txt"}`); v.Decision != tools.Ask {
		t.Fatalf("a plain rm: %+v", v)
	}
}

// TestTheDefaultTimeoutIsClaudeCodes: a hooks file that gives no timeout
// was written for Claude Code's default, 600 seconds for a command hook;
// dsh's used to be 60, which killed a Stop hook running the tests that
// Claude Code waited for.
func TestTheDefaultTimeoutIsClaudeCodes(t *testing.T) {
	if got := (hooks.Config{}).Defaults().Timeout; got != 600*time.Second {
		t.Fatalf("default timeout %s; Claude Code's is 600s", got)
	}
}
