package hooks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheSettingsFilesEnvReachesItsHooks: Claude Code sets a settings
// file's "env" for the session, so its hooks see those variables; dsh
// gives them to the hooks of that file (the config's own env wins), and
// still nothing else of its own environment.
func TestTheSettingsFilesEnvReachesItsHooks(t *testing.T) {
	t.Setenv("DSH_TEST_PROVIDER_KEY", "sk-never")
	r := newRig(t)
	out := filepath.Join(r.dir, "env")
	settings := filepath.Join(r.dir, "settings.json")
	doc := `{
  "env": {"LINT_LEVEL": "strict", "MAX_FILES": 3, "TEAM": "from-file"},
  "permissions": {"allow": ["Bash(npm run lint)"]},
  "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "env > ` + out + `"}]}]}
}`
	if err := os.WriteFile(settings, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"files": []any{settings}, "env": map[string]any{"TEAM": "from-config"}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash")
	r.approve("main", "bash", `{"command":"ls"}`)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LINT_LEVEL=strict\n", "MAX_FILES=3\n", "TEAM=from-config\n", "CLAUDE_PROJECT_DIR=" + r.ws + "\n"} {
		contains(t, "hook environment", string(data), want)
	}
	if s := string(data); strings.Contains(s, "sk-never") {
		t.Errorf("a variable of dsh's environment nobody named reached the hook:\n%s", s)
	}
}
