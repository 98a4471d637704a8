package files

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/dsh-go/dsh/services/tools"
)

// maxListedMatches caps the line numbers an ambiguous edit lists.
const maxListedMatches = 20

func (c Config) editTool() tools.Tool {
	return tools.Tool{
		Name: "edit",
		Description: fmt.Sprintf("Replace exact text in a file of the workspace. old must match the file exactly, whitespace and indentation included "+
			"(without read's line-number prefixes), and exactly once unless replace_all is true; otherwise nothing changes and the result says "+
			"how many matches there were and where. Include more surrounding lines in old to make it unique. Returns a short diff. "+
			"Files up to %s; use write to create a file.", size(c.MaxFileBytes)),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"File to edit, relative to the workspace (an absolute path must lie inside it)"},` +
			`"old":{"type":"string","minLength":1,"description":"Exact text to replace"},` +
			`"new":{"type":"string","description":"Text to put in its place (may be empty to delete)"},` +
			`"replace_all":{"type":"boolean","description":"Replace every match instead of requiring exactly one; default false"}},` +
			`"required":["path","old","new"],"additionalProperties":false}`),
		Execute: c.edit,
	}
}

func (c Config) edit(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
	var args struct {
		Path       string  `json:"path"`
		Old        string  `json:"old"`
		New        *string `json:"new"`
		ReplaceAll bool    `json:"replace_all"`
	}
	if err := decode(call, &args); err != nil {
		return fail(err)
	}
	switch {
	case args.Path == "":
		return failf("path is empty: name the file to edit")
	case args.Old == "":
		return failf("old is empty: give the exact text to replace (to create a file, use write)")
	case args.New == nil:
		return failf("new is missing: give the replacement text (an empty string deletes old)")
	case *args.New == args.Old:
		return failf("old and new are the same: nothing to change")
	}
	p, err := enter(call)
	if err != nil {
		return fail(err)
	}
	defer p.close()
	rel, err := p.rel(args.Path)
	if err != nil {
		return fail(err)
	}
	before, res, ok := c.loadText(ctx, p, rel, args.Path)
	if !ok {
		return res, nil
	}

	old, repl := args.Old, *args.New
	n := strings.Count(before, old)
	crlf := false
	if n == 0 && strings.Contains(before, "\r\n") && strings.Contains(old, "\n") && !strings.Contains(old, "\r\n") {
		// read shows lines without their \r; match what the model saw.
		old, repl = toCRLF(old), toCRLF(repl)
		n, crlf = strings.Count(before, old), true
	}
	switch {
	case n == 0:
		return failf("old was not found in %q, so nothing changed. %s", rel, nearHint(before, args.Old))
	case n > 1 && !args.ReplaceAll:
		return failf("old matches %d times in %q (at lines %s), so nothing changed; include more surrounding text to make it unique, or set replace_all to change all of them",
			n, rel, matchLines(before, old))
	}
	after := strings.ReplaceAll(before, old, repl)
	approved, r, ok := c.allowWrite(ctx, call, p, rel, args.Path)
	if !ok {
		return r, nil
	}
	if _, err := p.writeText(ctx, rel, after, c.rechecker(p, approved)); err != nil {
		return fail(p.explain(err, args.Path))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "edited %s: %s", rel, plural(n, "replacement", "replacements"))
	if crlf {
		b.WriteString(" (the file uses CRLF line endings; they were kept)")
	}
	b.WriteString("\n")
	b.WriteString(unified(rel, before, after, c.DiffMaxLines, c.GrepMaxLineBytes))
	return tools.Result{Content: b.String()}, nil
}

// loadText reads a whole text file for edit, or returns the error result.
func (c Config) loadText(ctx stdctx.Context, p *place, rel, arg string) (string, tools.Result, bool) {
	if e, ok := c.secret(p, rel, nil); ok {
		r, _ := fail(secretErr(arg, e))
		return "", r, false
	}
	if err := p.special(rel, arg); err != nil {
		r, _ := fail(err)
		return "", r, false
	}
	if text, ok := p.fromEditor(ctx, rel); ok {
		switch why := binaryReason([]byte(text[:min(len(text), sniffBytes)]), len(text) <= sniffBytes); {
		case len(text) > c.MaxFileBytes:
			r, _ := failf("%q is %d bytes, over edit's limit of %s; use write to replace it whole", arg, len(text), size(c.MaxFileBytes))
			return "", r, false
		case why != "":
			r, _ := failf("%q looks like a binary file (%s); edit changes text files only", arg, why)
			return "", r, false
		}
		return text, tools.Result{}, true
	}
	f, err := p.openRead(rel)
	if err != nil {
		r, _ := fail(p.explain(err, arg))
		return "", r, false
	}
	defer f.Close()
	if e, ok := c.secret(p, rel, f); ok {
		r, _ := fail(secretErr(arg, e))
		return "", r, false
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		r, _ := fail(p.explain(err, arg))
		return "", r, false
	case st.IsDir():
		r, _ := failf("%q is a directory; edit changes files", arg)
		return "", r, false
	case !st.Mode().IsRegular():
		r, _ := failf("%q is not a regular file (%v): the file tools handle regular files and folders only", arg, st.Mode().Type())
		return "", r, false
	case st.Size() > int64(c.MaxFileBytes):
		r, _ := failf("%q is %d bytes, over edit's limit of %s; use write to replace it whole", arg, st.Size(), size(c.MaxFileBytes))
		return "", r, false
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		r, _ := fail(p.explain(errLinked, arg))
		return "", r, false
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(c.MaxFileBytes)+1))
	if err != nil {
		r, _ := fail(p.explain(err, arg))
		return "", r, false
	}
	if len(data) > c.MaxFileBytes {
		// It grew after the size check: editing what was read would cut
		// off the rest when written back.
		r, _ := failf("%q grew past edit's limit of %s while it was read; use write to replace it whole", arg, size(c.MaxFileBytes))
		return "", r, false
	}
	if why := binaryReason(data[:min(len(data), sniffBytes)], len(data) <= sniffBytes); why != "" {
		r, _ := failf("%q looks like a binary file (%s); edit changes text files only", arg, why)
		return "", r, false
	}
	return string(data), tools.Result{}, true
}

func toCRLF(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// matchLines lists the 1-based lines where each match of old starts.
func matchLines(text, old string) string {
	var nums []string
	line, pos := 1, 0
	for len(nums) < maxListedMatches {
		i := strings.Index(text[pos:], old)
		if i < 0 {
			break
		}
		line += strings.Count(text[pos:pos+i], "\n")
		nums = append(nums, fmt.Sprint(line))
		line += strings.Count(old, "\n")
		pos += i + len(old)
	}
	s := strings.Join(nums, ", ")
	if len(nums) == maxListedMatches {
		s += ", …"
	}
	return s
}

// nearHint points at the file line most like old's first non-blank line,
// which is usually a whitespace or stale-content difference.
func nearHint(text, old string) string {
	first := ""
	for _, l := range strings.Split(old, "\n") {
		if t := strings.TrimSpace(l); t != "" {
			first = t
			break
		}
	}
	if first == "" {
		return "old is only whitespace; include visible text."
	}
	var contains int
	for i, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if t == first {
			return fmt.Sprintf("Line %d holds old's first line (ignoring indentation): %q; its indentation or the lines after it differ. Read the file again and copy the text exactly.", i+1, cutLine(strings.TrimRight(l, "\r"), 200))
		}
		if contains == 0 && strings.Contains(t, first) {
			contains = i + 1
		}
	}
	if contains > 0 {
		return fmt.Sprintf("Line %d contains old's first line; the lines around it differ. Read the file again and copy the text exactly.", contains)
	}
	return "No line holds old's first line either; read the file again to see its current content."
}
