package hooks_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/tools"
)

// TestAHooksFileIsProtectedFromTheFileTools: the model cannot plant a hook
// in a hooks file the config names; with nobody attached to approve, the
// write is refused and the file keeps its content. Unmounted with its
// entry, the file is free again.
func TestAHooksFileIsProtectedFromTheFileTools(t *testing.T) {
	r := newRig(t)
	file := filepath.Join(r.ws, "team-hooks.json")
	if err := os.WriteFile(file, []byte(`{"hooks":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted", "config": map[string]any{"replies": []any{map[string]any{"text": "hi"}}}},
			map[string]any{"use": "tools.files"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"files": []any{file}}},
		},
		"agents": []any{map[string]any{"id": "a", "provider": "scripted"}},
	})
	l, err := protect.Key.Get(r.h.Root())
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := l.Match(r.ws, file); !ok || !strings.Contains(e.What, "hooks file") {
		t.Fatalf("the hooks file is not on the list: %+v %v", e, ok)
	}
	svc, _ := tools.Key.Get(r.h.Root())
	a := r.agent("a")
	planted := `{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command","command":"touch /tmp/planted"}]}]}}`
	args, _ := json.Marshal(map[string]string{"path": "team-hooks.json", "content": planted})
	res, err := svc.Execute(stdctx.Background(), a.Context(), tools.Call{AgentID: "a", ID: "c", Name: "write", Arguments: args, Workspace: r.ws})
	if err != nil || !res.IsError || !strings.Contains(res.Content, "hooks file") {
		t.Fatalf("planting a hook: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(file); string(b) != `{"hooks":{}}` {
		t.Fatalf("the hooks file changed: %s", b)
	}
}
