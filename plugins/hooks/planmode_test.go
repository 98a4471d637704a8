package hooks_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/sessions"
)

// TestPermissionModeIsPlanWhilePlanning: Claude Code's permission_mode is
// "plan" in plan mode, and a hook that refuses writes while planning
// reads it. dsh has a plan mode (tools.plan) but always sent "default".
func TestPermissionModeIsPlanWhilePlanning(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen")
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "tools.plan", "config": map[string]any{"mode": "plan"}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"PreToolUse": []any{hook("Read", r.script("mode.sh", `jq -r .permission_mode >> `+seen), 0)},
			}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("read")
	r.approve("main", "read", `{"path":"a.txt"}`)
	a := r.agent("main")
	if _, err := sessions.EventPlan.Dispatch(stdctx.Background(), a.Context(), sessions.PlanQuery{Agent: a, Request: sessions.PlanRequest{Op: sessions.PlanLeave, By: "test"}}); err != nil {
		t.Fatal(err)
	}
	r.approve("main", "read", `{"path":"a.txt"}`)
	data, _ := os.ReadFile(seen)
	if got := strings.Fields(string(data)); strings.Join(got, " ") != "plan default" {
		t.Fatalf("permission_mode while planning, then after: %q", got)
	}
}
