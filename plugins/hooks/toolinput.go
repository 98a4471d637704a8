package hooks

import (
	"encoding/json"
	"math"
	"path/filepath"
	"reflect"
)

// renamed are the arguments Claude Code's tool takes under another name
// than dsh's: a hook reads both, and writes back either.
var renamed = map[string][]struct{ claude, dsh string }{
	"edit": {{"old_string", "old"}, {"new_string", "new"}},
	// Claude Code's subagent tool names the subagent subagent_type.
	"agent": {{"subagent_type", "agent"}},
}

// forHook is tool_input as a hook reads it: the call's arguments ("{}" for
// none) with what a hook written for Claude Code looks for added beside
// them:
//   - file_path, the absolute path, for a tool that names its file by
//     path (Claude Code's file tools take file_path: a formatter after
//     Edit|Write reads .tool_input.file_path);
//   - Claude Code's names of edit's old and new (old_string, new_string);
//   - bash's timeout in milliseconds, Claude Code's unit, where dsh's bash
//     takes seconds: a guard that caps .tool_input.timeout at 600000
//     must read the same number it would in Claude Code.
//
// Arguments that are not a JSON object are returned as they are.
func forHook(tool string, args json.RawMessage, workspace string) json.RawMessage {
	if len(args) == 0 {
		return json.RawMessage("{}")
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil || m == nil {
		return args
	}
	changed := false
	var path string
	if m["file_path"] == nil && json.Unmarshal(m["path"], &path) == nil && path != "" {
		if !filepath.IsAbs(path) && workspace != "" {
			path = filepath.Join(workspace, path)
		}
		m["file_path"], _ = json.Marshal(filepath.Clean(path))
		changed = true
	}
	for _, r := range renamed[tool] {
		if m[r.claude] == nil && m[r.dsh] != nil {
			m[r.claude] = m[r.dsh]
			changed = true
		}
	}
	var seconds float64
	if tool == "bash" && json.Unmarshal(m["timeout"], &seconds) == nil && m["timeout"] != nil {
		m["timeout"], _ = json.Marshal(int64(math.Round(seconds * 1000)))
		changed = true
	}
	if !changed {
		return args
	}
	out, err := encode(m)
	if err != nil {
		return args
	}
	return out
}

// fromHook turns a hook's updatedInput back into dsh's arguments. orig
// are the call's arguments, sent what forHook made of them. A key forHook
// added is dropped; when the hook changed its value, the value goes to
// dsh's key (a new file_path becomes the path). bash's timeout is
// milliseconds again and becomes seconds, rounded up.
func fromHook(tool string, orig, sent, updated json.RawMessage) json.RawMessage {
	var u, o, s map[string]json.RawMessage
	if json.Unmarshal(updated, &u) != nil || u == nil {
		return updated
	}
	_ = json.Unmarshal(orig, &o)
	_ = json.Unmarshal(sent, &s)
	changed := false
	pairs := append([]struct{ claude, dsh string }{{"file_path", "path"}}, renamed[tool]...)
	for _, p := range pairs {
		if o[p.claude] != nil || s[p.claude] == nil || u[p.claude] == nil {
			continue
		}
		if !sameJSON(u[p.claude], s[p.claude]) {
			u[p.dsh] = u[p.claude]
		}
		delete(u, p.claude)
		changed = true
	}
	var ms float64
	if tool == "bash" && u["timeout"] != nil && json.Unmarshal(u["timeout"], &ms) == nil {
		if o["timeout"] != nil && sameJSON(u["timeout"], s["timeout"]) {
			u["timeout"] = o["timeout"]
		} else {
			u["timeout"], _ = json.Marshal(max(int64(math.Ceil(ms/1000)), 1))
		}
		changed = true
	}
	if !changed {
		return updated
	}
	out, err := encode(u)
	if err != nil {
		return updated
	}
	return out
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
