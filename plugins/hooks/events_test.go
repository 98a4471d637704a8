package hooks_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

// TestNewerClaudeCodeEventsLoadAndAreNamed: a settings file written for a
// newer Claude Code, with events dsh has no stage for (PostCompact,
// ConfigChange, TeammateIdle, …), used to be refused whole as "unknown
// event", its Bash guard with it. It now loads: the guard runs, and each
// event dsh skips is named. A name Claude Code does not know still fails
// (TestConfigProblemsAreReportedAtCheck).
func TestNewerClaudeCodeEventsLoadAndAreNamed(t *testing.T) {
	r := newRig(t)
	deny := r.script("deny.sh", `echo "guarded" >&2; exit 2`)
	newer := []string{"PostCompact", "ConfigChange", "TeammateIdle", "StopFailure", "InstructionsLoaded", "FileChanged"}
	events := map[string]any{"PreToolUse": []any{hook("Bash", deny, 0)}}
	for _, e := range newer {
		events[e] = []any{hook("", "true", 0)}
	}
	data, _ := json.Marshal(map[string]any{"hooks": events})
	file := filepath.Join(r.dir, "settings.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}, map[string]any{"use": "hooks.command", "config": map[string]any{"files": []any{file}}}},
		"agents":  []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash")
	if v := r.approve("main", "bash", `{"command":"ls"}`); v.Decision != tools.Deny || v.Reason != "guarded" {
		t.Fatalf("the file's guard: %+v", v)
	}
	for _, e := range newer {
		contains(t, "log", r.logs.String(), "hooks."+e+": dsh has no "+e+" event; these hooks do not run")
	}

}
