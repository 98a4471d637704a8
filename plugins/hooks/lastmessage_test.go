package hooks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStopHooksReadTheLastAnswer: Claude Code gives Stop hooks the text
// of the answer the turn would end with (last_assistant_message); a hook
// that refuses to stop while the answer says "TODO" reads it. dsh sent no
// such field, so the hook read null and let every turn end.
func TestStopHooksReadTheLastAnswer(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen")
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted", "config": map[string]any{"replies": []any{
				map[string]any{"text": "done <TODO: tests> & more"},
				map[string]any{"text": "tests pass"},
			}}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"Stop": []any{hook("", r.script("stop.sh", `msg=$(jq -r .last_assistant_message)
echo "$msg" >> `+seen+`
case "$msg" in *TODO*) echo "the answer still has a TODO" >&2; exit 2;; esac`), 0)},
			}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	if err := r.prompt("main", "finish it"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(seen)
	if got := strings.TrimSpace(string(data)); got != "done <TODO: tests> & more\ntests pass" {
		t.Fatalf("the Stop hook read %q", got)
	}
}
