package lsp

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// positionSchema is the arguments of the tools that look at one place.
const positionSchema = `{"type":"object","properties":{` +
	`"path":{"type":"string","description":"File, relative to the workspace"},` +
	`"line":{"type":"integer","minimum":1,"description":"Line, from 1"},` +
	`"column":{"type":"integer","minimum":1,"description":"Column in characters, from 1; or give symbol instead"},` +
	`"symbol":{"type":"string","description":"The identifier on that line to look at (its first occurrence), instead of column"}},` +
	`"required":["path","line"],"additionalProperties":false}`

func (p *entry) tools() []tools.Tool {
	return []tools.Tool{
		{
			Name:         "lsp_definition",
			Description:  fmt.Sprintf("Find where the symbol at a place in a file is defined, through the file's language server. Give path, line and column, or path, line and the symbol's name. Lists at most %d locations.", p.cfg.MaxResults),
			Parameters:   json.RawMessage(positionSchema),
			ParallelSafe: true,
			ReadOnly:     true,
			Execute: func(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
				return p.locations(ctx, call, protocol.MethodTextDocumentDefinition, nil)
			},
		},
		{
			Name:         "lsp_references",
			Description:  fmt.Sprintf("List the references to the symbol at a place in a file, across the project, through the file's language server (the declaration included). Lists at most %d, then counts the rest.", p.cfg.MaxResults),
			Parameters:   json.RawMessage(positionSchema),
			ParallelSafe: true,
			ReadOnly:     true,
			Execute: func(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
				return p.locations(ctx, call, protocol.MethodTextDocumentReferences, map[string]any{"includeDeclaration": true})
			},
		},
		{
			Name:         "lsp_hover",
			Description:  "Show the type and documentation of the symbol at a place in a file, through the file's language server.",
			Parameters:   json.RawMessage(positionSchema),
			ParallelSafe: true,
			ReadOnly:     true,
			Execute:      p.hover,
		},
		{
			Name:        "lsp_symbols",
			Description: fmt.Sprintf("Search the project's symbols (functions, types, variables...) by name, through a language server. path picks the server (any file of that language); without it, the first configured server with a root marker in the workspace. Lists at most %d, then counts the rest.", p.cfg.MaxResults),
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","description":"Part of the symbol's name"},` +
				`"path":{"type":"string","description":"A file of the language to search, relative to the workspace"}},` +
				`"required":["query"],"additionalProperties":false}`),
			ParallelSafe: true,
			ReadOnly:     true,
			Execute:      p.symbols,
		},
	}
}

func failf(code errs.Code, format string, args ...any) (tools.Result, error) {
	return tools.Result{Content: fmt.Sprintf(format, args...) + " [" + string(code) + "]", IsError: true}, nil
}

// failed gives err the code ServerFailed, unless it carries a code of its
// own (a missing server, a back-off) that says more.
func failed(err error, what string) error {
	if errs.CodeOf(err) != "" {
		return err
	}
	return errs.Wrap(ServerFailed, err, what)
}

func failErr(err error) (tools.Result, error) {
	return tools.Result{Content: err.Error(), IsError: true}, nil
}

// place is a resolved position argument: the file, its server and the
// LSP position.
type place struct {
	ws, file, root, text string
	srv                  Server
	c                    *client
	u                    protocol.DocumentURI
	pos                  protocol.Position
}

// ask runs a request on the place's server. A server found dead by the
// request (it crashed since its last use, before dsh saw it go) is
// restarted and asked once more.
func (p *entry) ask(ctx stdctx.Context, pl *place, f func(*client) error) error {
	err := f(pl.c)
	if err == nil || !pl.c.dead() || ctx.Err() != nil {
		return err
	}
	c, _, gerr := p.servers.get(ctx, pl.srv, pl.root, true)
	if gerr != nil {
		return gerr
	}
	if pl.file != "" {
		c.sync.Lock()
		_, _, _, oerr := c.open(ctx, pl.file, pl.text)
		c.sync.Unlock()
		if oerr != nil {
			return oerr
		}
	}
	pl.c = c
	return f(c)
}

// at resolves a call's path/line/column (or symbol) and makes sure the
// server has the file's current text.
func (p *entry) at(ctx stdctx.Context, call tools.Call) (*place, *tools.Result) {
	var args struct {
		Path   string `json:"path"`
		Line   int    `json:"line"`
		Column int    `json:"column"`
		Symbol string `json:"symbol"`
	}
	bad := func(code errs.Code, format string, a ...any) (*place, *tools.Result) {
		r, _ := failf(code, format, a...)
		return nil, &r
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return bad(errs.InvalidArgument, "the arguments are not valid: %v", err)
	}
	if args.Column == 0 && args.Symbol == "" {
		return bad(errs.InvalidArgument, "give column (from 1) or symbol (the identifier's name on that line)")
	}
	ws, file, ok := target(tools.Call{Arguments: call.Arguments, Workspace: call.Workspace})
	if !ok {
		return bad(errs.InvalidArgument, "path %q is not a file inside the workspace; give a path relative to it", args.Path)
	}
	srv, ok := p.cfg.serverFor(file)
	if !ok {
		return bad(NoServer, "no language server is configured for %s; the lsp plugin's servers handle %s", filepath.Base(file), p.handled())
	}
	text, err := readIn(ws, file)
	if err != nil {
		return bad(errs.InvalidArgument, "cannot read %s: %v", relTo(ws, file), err)
	}
	lines := strings.Split(string(text), "\n")
	if args.Line > len(lines) {
		return bad(errs.InvalidArgument, "%s has %d lines; line %d is past its end", relTo(ws, file), len(lines), args.Line)
	}
	line := lines[args.Line-1]
	col := args.Column - 1
	if args.Symbol != "" {
		col = findWord(line, args.Symbol)
		if col < 0 {
			return bad(errs.InvalidArgument, "%q is not on line %d of %s, which reads: %s", args.Symbol, args.Line, relTo(ws, file), strings.TrimSpace(line))
		}
	}
	if col > utf8.RuneCountInString(line) {
		return bad(errs.InvalidArgument, "line %d of %s has %d characters; column %d is past its end", args.Line, relTo(ws, file), utf8.RuneCountInString(line), args.Column)
	}
	rctx, cancel := stdctx.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	root := rootOf(srv, ws, file)
	c, _, err := p.servers.get(rctx, srv, root, true)
	if err != nil {
		r, _ := failErr(err)
		return nil, &r
	}
	c.sync.Lock()
	u, _, _, err := c.open(ctx, file, string(text))
	c.sync.Unlock()
	if err != nil {
		r, _ := failErr(failed(err, fmt.Sprintf("lsp: %s did not take %s", srv.Name, relTo(ws, file))))
		return nil, &r
	}
	return &place{ws: ws, file: file, root: root, text: string(text), srv: srv, c: c, u: u, pos: protocol.Position{Line: uint32(args.Line - 1), Character: utf16Col(line, col)}}, nil
}

// handled lists the globs the configured servers handle.
func (p *entry) handled() string {
	var g []string
	for _, s := range p.cfg.Servers {
		g = append(g, s.Files...)
	}
	return strings.Join(g, ", ")
}

// findWord is the rune index of the first occurrence of word in line
// that stands alone (not inside a longer identifier), or -1.
func findWord(line, word string) int {
	isID := func(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }
	from := 0
	for {
		i := strings.Index(line[from:], word)
		if i < 0 {
			return -1
		}
		i += from
		before, _ := utf8.DecodeLastRuneInString(line[:i])
		after, _ := utf8.DecodeRuneInString(line[i+len(word):])
		if (i == 0 || !isID(before)) && (i+len(word) == len(line) || !isID(after)) {
			return utf8.RuneCountInString(line[:i])
		}
		from = i + len(word)
	}
}

// utf16Col is LSP's column (UTF-16 code units) of the rune index col.
func utf16Col(line string, col int) uint32 {
	n := 0
	for i, r := range []rune(line) {
		if i == col {
			break
		}
		n += len(utf16.Encode([]rune{r}))
	}
	return uint32(n)
}

func (p *entry) locations(ctx stdctx.Context, call tools.Call, method string, refContext any) (tools.Result, error) {
	pl, bad := p.at(ctx, call)
	if bad != nil {
		return *bad, nil
	}
	params := map[string]any{"textDocument": protocol.TextDocumentIdentifier{URI: pl.u}, "position": pl.pos}
	if refContext != nil {
		params["context"] = refContext
	}
	rctx, cancel := stdctx.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	var raw json.RawMessage
	if err := p.ask(rctx, pl, func(c *client) error { return c.call(rctx, method, params, &raw) }); err != nil {
		return failErr(failed(err, "lsp: "+method))
	}
	locs := decodeLocations(raw)
	if len(locs) == 0 {
		return tools.Result{Content: "no results"}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", len(locs), map[bool]string{true: "location", false: "locations"}[len(locs) == 1])
	for i, l := range locs {
		if i == p.cfg.MaxResults {
			fmt.Fprintf(&b, "\n... and %d more", len(locs)-i)
			break
		}
		b.WriteString("\n" + p.describe(pl.ws, l))
	}
	return tools.Result{Content: b.String()}, nil
}

// decodeLocations reads a Location, a list of them, or a list of
// LocationLinks: servers answer definition with any of the three.
func decodeLocations(raw json.RawMessage) []protocol.Location {
	var many []struct {
		protocol.Location
		TargetURI            protocol.DocumentURI `json:"targetUri"`
		TargetSelectionRange protocol.Range       `json:"targetSelectionRange"`
	}
	if json.Unmarshal(raw, &many) == nil {
		out := make([]protocol.Location, 0, len(many))
		for _, l := range many {
			if l.TargetURI != "" {
				out = append(out, protocol.Location{URI: l.TargetURI, Range: l.TargetSelectionRange})
			} else {
				out = append(out, l.Location)
			}
		}
		return out
	}
	var one protocol.Location
	if json.Unmarshal(raw, &one) == nil && one.URI != "" {
		return []protocol.Location{one}
	}
	return nil
}

// describe is "path:line:column: the line's text" for a location. The
// text is shown for files in the workspace only: the tools read nothing
// outside it, as the file tools do not (a definition in the standard
// library is a path and a position).
func (p *entry) describe(ws string, l protocol.Location) string {
	file := uri.URI(l.URI).Filename()
	line := int(l.Range.Start.Line)
	text := ""
	if b, err := readIn(ws, file); err == nil {
		if lines := strings.Split(string(b), "\n"); line < len(lines) {
			text = strings.TrimSpace(lines[line])
			if len(text) > 200 {
				text = text[:200] + "..."
			}
		}
	}
	where := fmt.Sprintf("%s:%d:%d", relTo(ws, file), line+1, l.Range.Start.Character+1)
	if text == "" {
		return where
	}
	return where + ": " + text
}

func (p *entry) hover(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
	pl, bad := p.at(ctx, call)
	if bad != nil {
		return *bad, nil
	}
	rctx, cancel := stdctx.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	var raw struct {
		Contents json.RawMessage `json:"contents"`
	}
	params := map[string]any{"textDocument": protocol.TextDocumentIdentifier{URI: pl.u}, "position": pl.pos}
	if err := p.ask(rctx, pl, func(c *client) error { return c.call(rctx, protocol.MethodTextDocumentHover, params, &raw) }); err != nil {
		return failErr(failed(err, "lsp: textDocument/hover"))
	}
	text := strings.TrimSpace(hoverText(raw.Contents))
	if text == "" {
		return tools.Result{Content: "nothing to show at that place"}, nil
	}
	return tools.Result{Content: text}, nil
}

// hoverText reads MarkupContent, a MarkedString ({language, value} or a
// string) or a list of MarkedStrings.
func hoverText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var v struct {
		Value string `json:"value"`
	}
	if json.Unmarshal(raw, &v) == nil && v.Value != "" {
		return v.Value
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		parts := make([]string, 0, len(list))
		for _, el := range list {
			parts = append(parts, hoverText(el))
		}
		return strings.Join(parts, "\n\n")
	}
	return ""
}

func (p *entry) symbols(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
	var args struct {
		Query string `json:"query"`
		Path  string `json:"path"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return failf(errs.InvalidArgument, "the arguments are not valid: %v", err)
	}
	ws, file, srv, ok := p.pickServer(call, args.Path)
	if !ok {
		if args.Path != "" {
			return failf(NoServer, "no language server is configured for %s; the lsp plugin's servers handle %s", args.Path, p.handled())
		}
		return failf(NoServer, "no configured language server has a root marker in the workspace; give path, a file of the language to search")
	}
	rctx, cancel := stdctx.WithTimeout(ctx, p.cfg.RequestTimeout)
	defer cancel()
	root := rootOf(srv, ws, file)
	c, _, err := p.servers.get(rctx, srv, root, true)
	if err != nil {
		return failErr(err)
	}
	pl := &place{ws: ws, root: root, srv: srv, c: c}
	var list []struct {
		Name          string              `json:"name"`
		Kind          protocol.SymbolKind `json:"kind"`
		ContainerName string              `json:"containerName"`
		Location      protocol.Location   `json:"location"`
	}
	err = p.ask(rctx, pl, func(c *client) error {
		return c.call(rctx, protocol.MethodWorkspaceSymbol, map[string]any{"query": args.Query}, &list)
	})
	if err != nil {
		return failErr(failed(err, "lsp: workspace/symbol"))
	}
	if len(list) == 0 {
		return tools.Result{Content: fmt.Sprintf("no symbols match %q", args.Query)}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", len(list), map[bool]string{true: "symbol", false: "symbols"}[len(list) == 1])
	for i, s := range list {
		if i == p.cfg.MaxResults {
			fmt.Fprintf(&b, "\n... and %d more", len(list)-i)
			break
		}
		name := s.Name
		if s.ContainerName != "" {
			name = s.ContainerName + "." + s.Name
		}
		f := uri.URI(s.Location.URI).Filename()
		fmt.Fprintf(&b, "\n%s (%s) %s:%d:%d", name, strings.ToLower(s.Kind.String()), relTo(ws, f), s.Location.Range.Start.Line+1, s.Location.Range.Start.Character+1)
	}
	return tools.Result{Content: b.String()}, nil
}

// pickServer is the server lsp_symbols asks: path's, or the first whose
// root marker is in the workspace. file stands for where to find the
// root.
func (p *entry) pickServer(call tools.Call, path string) (ws, file string, srv Server, ok bool) {
	if path != "" {
		raw, _ := json.Marshal(map[string]string{"path": path})
		ws, file, ok = target(tools.Call{Arguments: raw, Workspace: call.Workspace})
		if !ok {
			return
		}
		srv, ok = p.cfg.serverFor(file)
		return
	}
	ws = call.Workspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	for _, s := range p.cfg.Servers {
		for _, m := range s.RootMarkers {
			if _, err := os.Stat(filepath.Join(ws, m)); err == nil {
				return ws, filepath.Join(ws, m), s, true
			}
		}
	}
	return ws, "", Server{}, false
}
