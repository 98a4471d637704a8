package lsp

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
	"go.lsp.dev/protocol"
)

// editTools are the tools after whose calls diagnostics are appended.
var editTools = map[string]bool{"write": true, "edit": true}

// afterEdit is the tools/execute listener: around a write or edit of a
// file some server handles, it takes the file's diagnostics before the
// call and after it, and appends the errors that are new.
func (p *entry) afterEdit(ctx stdctx.Context, x tools.Execution, next tools.ExecuteNext) (tools.Result, error) {
	if x.Tool == nil || !editTools[x.Call.Name] {
		return next.Call(ctx, x)
	}
	ws, file, ok := target(x.Call)
	if !ok {
		return next.Call(ctx, x)
	}
	srv, ok := p.cfg.serverFor(file)
	if !ok {
		return next.Call(ctx, x)
	}
	root := rootOf(srv, ws, file)
	before, known, note := p.before(ctx, srv, root, ws, file)
	r, err := next.Call(ctx, x)
	if err != nil || r.IsError {
		return r, err
	}
	if note == "" {
		note = p.after(ctx, srv, root, ws, file, before, known)
	}
	if note != "" {
		r.Content = strings.TrimRight(r.Content, "\n") + "\n\n" + note
	}
	return r, nil
}

// target is the workspace and the absolute file a write or edit names,
// when it lies inside the workspace (a call outside it is the tool's to
// refuse, and no server sees it).
func target(call tools.Call) (ws, file string, ok bool) {
	var args struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(call.Arguments, &args) != nil || args.Path == "" {
		return "", "", false
	}
	ws = call.Workspace
	if ws == "" {
		var err error
		if ws, err = os.Getwd(); err != nil {
			return "", "", false
		}
	}
	ws = filepath.Clean(ws)
	file = args.Path
	if !filepath.IsAbs(file) {
		file = filepath.Join(ws, file)
	}
	file = filepath.Clean(file)
	if !strings.HasPrefix(file, ws+string(filepath.Separator)) {
		return "", "", false
	}
	return ws, file, true
}

// before is the file's diagnostics as the server has them before the
// call: it opens the file there (starting the server) when the server
// does not have its current text, and waits for the answer. note is set
// when there will be nothing to compare: the server is missing (said
// once) or did not start. known is false when the server did not answer
// in time, so errors after the call cannot be told from older ones.
func (p *entry) before(ctx stdctx.Context, srv Server, root, ws, file string) (before []protocol.Diagnostic, known bool, note string) {
	c, first, err := p.servers.get(ctx, srv, root, false)
	if err != nil {
		var e *errs.Error
		if errors.As(err, &e) && e.Code == ServerMissing && !first {
			return nil, false, "" // said already
		}
		return nil, false, fmt.Sprintf("[lsp: no diagnostics: %v]", err)
	}
	text, err := readIn(ws, file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true, "" // a new file had no errors
	}
	if err != nil {
		return nil, false, ""
	}
	c.sync.Lock()
	defer c.sync.Unlock()
	mark := c.mark()
	u, v, sent, err := c.open(ctx, file, string(text))
	if err != nil {
		return nil, false, ""
	}
	if !sent {
		list, ok := c.latest(u)
		return list, ok, ""
	}
	list, ok := c.diagnostics(ctx, u, v, mark, p.cfg.DiagnosticsWait)
	return list, ok, ""
}

// after syncs the file's new text and reports the errors the server
// finds that were not in before.
func (p *entry) after(ctx stdctx.Context, srv Server, root, ws, file string, before []protocol.Diagnostic, known bool) string {
	c := p.servers.running(srv.Name, root)
	if c == nil {
		return fmt.Sprintf("[lsp: no diagnostics: %s exited during the call; it restarts on next use]", srv.Name)
	}
	text, err := readIn(ws, file)
	if err != nil {
		return "" // written through an editor, not to the disk
	}
	c.sync.Lock()
	defer c.sync.Unlock()
	mark := c.mark()
	u, v, sent, err := c.open(ctx, file, string(text))
	if err != nil {
		return fmt.Sprintf("[lsp: no diagnostics: %v]", err)
	}
	var list []protocol.Diagnostic
	if sent {
		var ok bool
		list, ok = c.diagnostics(ctx, u, v, mark, p.cfg.DiagnosticsWait)
		if !ok && ctx.Err() != nil {
			return "" // the turn was cancelled: nobody reads the note
		}
		if !ok {
			return fmt.Sprintf("[lsp: %s sent no diagnostics within diagnostics_wait (%s)]", srv.Name, p.cfg.DiagnosticsWait)
		}
	} else {
		list, _ = c.latest(u)
	}
	return formatNew(srv.Name, relTo(ws, file), newErrors(before, list), p.cfg.MaxDiagnostics, known)
}

// newErrors are the errors of after that before did not have. They are
// told apart by severity, source, code and message, not position: an edit
// moves the lines below it, and a moved error is not a new one. Each
// error of before excuses one equal error of after.
func newErrors(before, after []protocol.Diagnostic) []protocol.Diagnostic {
	seen := map[string]int{}
	for _, d := range before {
		if isError(d) {
			seen[identity(d)]++
		}
	}
	var out []protocol.Diagnostic
	for _, d := range after {
		if !isError(d) {
			continue
		}
		if id := identity(d); seen[id] > 0 {
			seen[id]--
			continue
		}
		out = append(out, d)
	}
	return out
}

// isError: an error, or a diagnostic without a severity (LSP leaves that
// to the client; a server that omits it is not saying "hint").
func isError(d protocol.Diagnostic) bool {
	return d.Severity == protocol.DiagnosticSeverityError || d.Severity == 0
}

func identity(d protocol.Diagnostic) string {
	return fmt.Sprintf("%s\x00%v\x00%s", d.Source, d.Code, d.Message)
}

// formatNew renders new errors for a tool result, at most max of them.
// Without known diagnostics from before the call, the errors are all the
// file has, and the header says so.
func formatNew(server, rel string, list []protocol.Diagnostic, max int, known bool) string {
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	noun := "error"
	if len(list) > 1 {
		noun = "errors"
	}
	if known {
		fmt.Fprintf(&b, "%s reports %d new %s in %s:", server, len(list), noun, rel)
	} else {
		fmt.Fprintf(&b, "%s reports %d %s in %s (it had not answered for the file before this call, so some may be older):", server, len(list), noun, rel)
	}
	for i, d := range list {
		if i == max {
			fmt.Fprintf(&b, "\n  ... and %d more", len(list)-max)
			break
		}
		msg := strings.ReplaceAll(d.Message, "\n", " ")
		fmt.Fprintf(&b, "\n  %s:%d:%d: %s", rel, d.Range.Start.Line+1, d.Range.Start.Character+1, msg)
	}
	return b.String()
}

// readIn reads file, which lies in ws, through an os.Root: a symlink
// leading out of the workspace is refused, as the file tools refuse it,
// so no text from outside reaches a server or a result.
func readIn(ws, file string) ([]byte, error) {
	rel, err := filepath.Rel(ws, file)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s is outside the workspace", file)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.ReadFile(rel)
}

// relTo is file relative to the workspace, for results.
func relTo(ws, file string) string {
	if r, err := filepath.Rel(ws, file); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return file
}
