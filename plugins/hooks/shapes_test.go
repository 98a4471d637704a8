package hooks_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realTools is a host config with dsh's real bash (unsandboxed: the
// sandbox is not what these tests are about) and file tools, bash
// allowed by a rule, and the given hooks on the root.
func realTools(hooks map[string]any) map[string]any {
	return map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "tools.bash", "config": map[string]any{"sandbox": map[string]any{"mode": "off"}}},
			map[string]any{"use": "tools.files"},
			map[string]any{"use": "tools.permission", "config": map[string]any{"rules": []any{map[string]any{"tool": "bash", "decision": "allow"}}}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": hooks}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	}
}

// lines reads the JSON lines a hook appended to name.
func lines(t *testing.T, name string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		out = append(out, m)
	}
	return out
}

// TestBashReadsAsClaudeCodesBash: tool_input.timeout is milliseconds, as
// in Claude Code (dsh's bash takes seconds); tool_response has stdout,
// stderr, interrupted and isImage; a hook that lowers the timeout in
// milliseconds lowers it in seconds for dsh's bash. A command that fails
// (exit 3, a timeout) runs PostToolUseFailure with the error instead, as
// in Claude Code, not PostToolUse.
func TestBashReadsAsClaudeCodesBash(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen")
	failed := filepath.Join(r.dir, "failed")
	r.start(realTools(map[string]any{
		"PreToolUse": []any{hook("Bash", `jq '{hookSpecificOutput: {hookEventName: "PreToolUse",
			updatedInput: (.tool_input + {timeout: ([.tool_input.timeout // 600000, 1000] | min)})}}'`, 0)},
		"PostToolUse":        []any{hook("Bash", `jq -c '{timeout: .tool_input.timeout, r: .tool_response}' >> `+seen, 0)},
		"PostToolUseFailure": []any{hook("Bash", `jq -c '{event: .hook_event_name, timeout: .tool_input.timeout, error, is_interrupt, r: .tool_response}' >> `+failed, 0)},
	}))
	if v := r.approve("main", "bash", `{"command":"sleep 1","timeout":30}`); string(v.Arguments) != `{"command":"sleep 1","timeout":1}` {
		t.Fatalf("30000 ms capped at 1000 ms must be a timeout of 1 s: %s", v.Arguments)
	}
	r.execute("main", "bash", `{"command":"echo out; echo err >&2","timeout":5}`)
	r.execute("main", "bash", `{"command":"echo out; echo err >&2; exit 3","timeout":5}`)
	r.execute("main", "bash", `{"command":"sleep 5","timeout":5}`)
	got := lines(t, seen)
	if len(got) != 1 {
		t.Fatalf("PostToolUse ran %d times: %v", len(got), got)
	}
	first := got[0]["r"].(map[string]any)
	if got[0]["timeout"] != 1000.0 || first["stdout"] != "out\nerr\n" || first["stderr"] != "" || first["interrupted"] != false || first["isImage"] != false {
		t.Errorf("exit 0: %v", got[0])
	}
	fails := lines(t, failed)
	if len(fails) != 2 {
		t.Fatalf("PostToolUseFailure ran %d times: %v", len(fails), fails)
	}
	for i, want := range []string{"exit code: 3", "timed out after"} {
		f := fails[i]
		if f["event"] != "PostToolUseFailure" || f["timeout"] != 1000.0 || !strings.Contains(f["error"].(string), want) || f["is_interrupt"] != false || f["r"] != nil {
			t.Errorf("failure %d: %v", i, f)
		}
	}
}

// TestFileToolsReadAsClaudeCodesFileTools: Write, Edit and Read give the
// fields of Claude Code's tool_response (filePath, type create/update,
// oldString/newString, file.content), and edit's input carries
// old_string/new_string; a hook that rewrites new_string rewrites new.
func TestFileToolsReadAsClaudeCodesFileTools(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen")
	r.start(realTools(map[string]any{
		"PreToolUse": []any{hook("Edit", `jq '{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "allow",
			updatedInput: (.tool_input + {new_string: (.tool_input.new_string | ascii_upcase)})}}'`, 0)},
		"PostToolUse": []any{hook("Write|Edit|Read", `jq -c '{tool: .tool_name, in: .tool_input, r: .tool_response}' >> `+seen, 0)},
	}))
	file := filepath.Join(r.ws, "notes.txt")
	for _, c := range []struct{ tool, args string }{
		{"write", `{"path":"notes.txt","content":"one\ntwo\n"}`},
		{"write", `{"path":"notes.txt","content":"one\ntwo\nthree\n"}`},
		{"edit", `{"path":"notes.txt","old":"two","new":"deux"}`},
		{"read", `{"path":"notes.txt","offset":2}`},
	} {
		if res := r.execute("main", c.tool, c.args); res.IsError {
			t.Fatalf("%s %s: %+v", c.tool, c.args, res)
		}
	}
	if data, _ := os.ReadFile(file); string(data) != "one\nDEUX\nthree\n" {
		t.Fatalf("the edit's new_string rewrite did not reach the tool: %q", data)
	}
	got := lines(t, seen)
	if len(got) != 4 {
		t.Fatalf("PostToolUse ran %d times: %v", len(got), got)
	}
	want := []struct {
		tool string
		r    map[string]any
	}{
		{"Write", map[string]any{"type": "create", "filePath": file, "content": "one\ntwo\n", "success": true}},
		{"Write", map[string]any{"type": "update", "filePath": file, "content": "one\ntwo\nthree\n"}},
		{"Edit", map[string]any{"filePath": file, "oldString": "two", "newString": "DEUX", "replaceAll": false, "userModified": false}},
		{"Read", map[string]any{"type": "text", "file": map[string]any{"filePath": file, "content": "DEUX\nthree\n", "startLine": 2.0, "numLines": 2.0}}},
	}
	for i, w := range want {
		if got[i]["tool"] != w.tool {
			t.Errorf("%d: tool_name %v, want %s", i, got[i]["tool"], w.tool)
		}
		resp := got[i]["r"].(map[string]any)
		for k, v := range w.r {
			if mustJSON(resp[k]) != mustJSON(v) {
				t.Errorf("%s #%d: tool_response.%s = %s, want %s", w.tool, i, k, mustJSON(resp[k]), mustJSON(v))
			}
		}
	}
	edit := got[2]["in"].(map[string]any)
	if edit["old_string"] != "two" || edit["new_string"] != "DEUX" || edit["file_path"] != file {
		t.Errorf("edit's tool_input: %v", edit)
	}
}
