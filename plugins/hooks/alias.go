package hooks

import (
	"encoding/json"
	"path/filepath"
)

// withFilePath adds file_path, the absolute path, to the arguments of a
// call that names its file by path: Claude Code's file tools call it
// file_path, and hooks written for them read .tool_input.file_path (a
// formatter after Edit|Write, say). Arguments that already have one, or
// no string path, are returned as they are.
func withFilePath(args json.RawMessage, workspace string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil || m == nil || m["file_path"] != nil {
		return args
	}
	var path string
	if json.Unmarshal(m["path"], &path) != nil || path == "" {
		return args
	}
	if !filepath.IsAbs(path) && workspace != "" {
		path = filepath.Join(workspace, path)
	}
	m["file_path"], _ = json.Marshal(filepath.Clean(path))
	out, err := json.Marshal(m)
	if err != nil {
		return args
	}
	return out
}

// withoutFilePath undoes withFilePath on a hook's updatedInput: a
// file_path the call did not have is dropped, and when the hook changed
// it, it becomes the path. sent is the file_path the hook was given ("" if
// none was added).
func withoutFilePath(updated json.RawMessage, sent string) json.RawMessage {
	if sent == "" {
		return updated
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(updated, &m) != nil || m["file_path"] == nil {
		return updated
	}
	var fp string
	if json.Unmarshal(m["file_path"], &fp) == nil && fp != sent && fp != "" {
		m["path"], _ = json.Marshal(fp)
	}
	delete(m, "file_path")
	out, err := json.Marshal(m)
	if err != nil {
		return updated
	}
	return out
}

// sentFilePath is the file_path withFilePath added, or "".
func sentFilePath(orig, sent json.RawMessage) string {
	var o, s struct {
		FilePath *string `json:"file_path"`
	}
	if json.Unmarshal(orig, &o) != nil || o.FilePath != nil || json.Unmarshal(sent, &s) != nil || s.FilePath == nil {
		return ""
	}
	return *s.FilePath
}
