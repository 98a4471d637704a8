package hooks_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

// TestFileToolsShowFilePathAsClaudeCodeDoes: a hook reads file_path (the
// absolute path) beside path; a rewrite of file_path becomes the path and
// file_path never reaches the tool.
func TestFileToolsShowFilePathAsClaudeCodeDoes(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen.json")
	r.preToolUse(
		hook("Write", r.script("rw.sh", `cat > `+seen+`; echo '{"hookSpecificOutput":{"updatedInput":{"path":"a.txt","file_path":"/elsewhere/b.txt","content":"x"}}}'`), 0),
		hook("Read", r.script("echo.sh", `printf '{"hookSpecificOutput":{"updatedInput":%s}}' "$(sed 's/.*"tool_input":\({[^}]*}\).*/\1/')"`), 0),
	)
	v := r.approve("main", "write", `{"path":"a.txt","content":"x"}`)
	var in struct {
		ToolInput map[string]string `json:"tool_input"`
	}
	data, _ := os.ReadFile(seen)
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatal(err)
	}
	if in.ToolInput["file_path"] != filepath.Join(r.ws, "a.txt") || in.ToolInput["path"] != "a.txt" {
		t.Fatalf("tool_input: %v", in.ToolInput)
	}
	if string(v.Arguments) != `{"content":"x","path":"/elsewhere/b.txt"}` {
		t.Fatalf("rewritten arguments: %s", v.Arguments)
	}
	// A hook that echoes the input back unchanged changes nothing.
	if v := r.approve("main", "read", `{"path":"a.txt"}`); string(v.Arguments) != `{"path":"a.txt"}` {
		t.Fatalf("echoed arguments: %s", v.Arguments)
	}
}

// TestPostToolUseContextAndErrorResults: additionalContext is appended;
// as in Claude Code, PostToolUse runs after a call that succeeded and
// PostToolUseFailure, with the error, after one that failed.
func TestPostToolUseContextAndErrorResults(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"PostToolUse": []any{hook("", r.script("ctx.sh", `echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"it worked"}}'`), 0)},
				"PostToolUseFailure": []any{hook("", r.script("fail.sh", `err=$(jq -r .error)
echo "{\"hookSpecificOutput\":{\"hookEventName\":\"PostToolUseFailure\",\"additionalContext\":\"it failed: $err\"}}"`), 0)},
			}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	svc, _ := tools.Key.Get(r.h.Root())
	for name, res := range map[string]tools.Result{"ok": {Content: "fine"}, "bad": {Content: "broken", IsError: true}} {
		if err := svc.Register(r.h.Root(), tools.Tool{Name: name, Execute: func(stdctx.Context, tools.Call) (tools.Result, error) { return res, nil }}); err != nil {
			t.Fatal(err)
		}
	}
	a := r.agent("main")
	for name, want := range map[string]tools.Result{
		"ok":  {Content: "fine\n\nPostToolUse hook context: it worked"},
		"bad": {Content: "broken\n\nPostToolUseFailure hook context: it failed: broken", IsError: true},
	} {
		got, err := svc.Execute(stdctx.Background(), a.Context(), tools.Call{AgentID: "main", Name: name, Workspace: r.ws})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, %v; want %+v", name, got, err, want)
		}
	}
}
