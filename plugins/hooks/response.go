package hooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/services/tools"
)

// response is tool_response, what a PostToolUse hook reads about the
// result: dsh's content and is_error for every tool, and for the tools
// dsh shares with Claude Code the fields Claude Code's tool gives, so
// `jq .tool_response.filePath` or `.tool_response.stdout` reads the same.
// existed says whether write's file was there before the call (nil when
// unknown).
func response(tool string, args json.RawMessage, workspace string, res tools.Result, existed *bool) map[string]any {
	out := map[string]any{"content": res.Content, "is_error": res.IsError}
	var a struct {
		Path       string  `json:"path"`
		Content    *string `json:"content"`
		Old        string  `json:"old"`
		New        string  `json:"new"`
		ReplaceAll bool    `json:"replace_all"`
	}
	_ = json.Unmarshal(args, &a)
	file := a.Path
	if file != "" && !filepath.IsAbs(file) && workspace != "" {
		file = filepath.Join(workspace, file)
	}
	if file != "" {
		file = filepath.Clean(file)
	}
	switch tool {
	case "bash":
		stdout, stderr, interrupted := bashOutput(res.Content)
		out["stdout"], out["stderr"], out["interrupted"], out["isImage"] = stdout, stderr, interrupted, false
	case "write":
		out["filePath"], out["success"] = file, !res.IsError
		if a.Content != nil {
			out["content"] = *a.Content
		}
		if existed != nil {
			out["type"] = map[bool]string{false: "create", true: "update"}[*existed]
		}
	case "edit":
		out["filePath"], out["oldString"], out["newString"], out["replaceAll"] = file, a.Old, a.New, a.ReplaceAll
		out["userModified"], out["success"] = false, !res.IsError
	case "read":
		if !res.IsError && len(res.Parts) == 0 {
			content, start, n := readLines(res.Content)
			out["type"] = "text"
			out["file"] = map[string]any{"filePath": file, "content": content, "startLine": start, "numLines": n}
		}
	}
	return out
}

// bashOutput splits the result of dsh's bash into Claude Code's fields.
// dsh's bash reads stdout and stderr through one pipe, in the order they
// were written, so stdout holds both and stderr is empty; the last line
// says how the command ended, and a timeout or a cancel is interrupted.
// A result without that line is a command that never started: its text
// is the error, in stderr.
func bashOutput(content string) (stdout, stderr string, interrupted bool) {
	body, last := "", content
	if i := strings.LastIndexByte(content, '\n'); i >= 0 {
		body, last = content[:i+1], content[i+1:]
	}
	switch {
	case strings.HasPrefix(last, "exit code: "), strings.HasPrefix(last, "killed by signal "):
	case strings.HasPrefix(last, "timed out after "), strings.HasPrefix(last, "cancelled: "):
		interrupted = true
	default:
		return "", content, false
	}
	if body == "(no output)\n" {
		body = ""
	}
	return body, "", interrupted
}

// numbered is one line of dsh's read output: the line number, a tab, the
// line.
var numbered = lazyregexp.New(`^ *([0-9]+)\t(.*)$`)

// readLines takes the file's text back out of dsh's read output, which
// numbers each line and may end with a note on where to continue: the
// lines, the first one's number and how many there are.
func readLines(content string) (text string, start, n int) {
	var b strings.Builder
	for _, line := range strings.SplitAfter(content, "\n") {
		m := numbered.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
		if m == nil {
			continue
		}
		if n == 0 {
			start, _ = strconv.Atoi(m[1])
		}
		n++
		b.WriteString(m[2])
		b.WriteByte('\n')
	}
	return b.String(), start, n
}

// exists reports, for a write, whether its file is there before the call
// runs: Claude Code's Write says "create" or "update".
func exists(tool string, args json.RawMessage, workspace string) *bool {
	if tool != "write" {
		return nil
	}
	var a struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(args, &a) != nil || a.Path == "" {
		return nil
	}
	p := a.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(workspace, p)
	}
	_, err := os.Lstat(p)
	there := err == nil
	return &there
}
