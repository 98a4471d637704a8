package files

import (
	"bufio"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/dsh-go/dsh/plugins/tools/internal/workspace"
	"github.com/dsh-go/dsh/services/tools"
)

// grepScanLine is how much of one line grep matches against; the rest of
// a longer line is not searched.
const grepScanLine = 64 << 10

func (c Config) grepTool() tools.Tool {
	return tools.Tool{
		Name: "grep",
		Description: fmt.Sprintf("Search file contents in the workspace with a Go (RE2) regular expression: no lookaround or backreferences. "+
			"Returns matching lines as path:line: text, files in path order, at most %d lines (each cut at %d bytes), with a count of the rest. "+
			".git, .gitignore'd files, binary files, symlinks and files over %s are skipped.",
			c.GrepMaxMatches, c.GrepMaxLineBytes, size(c.MaxFileBytes)),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","minLength":1,"description":"Regular expression (Go RE2 syntax) matched against each line"},` +
			`"path":{"type":"string","description":"File or folder to search, relative to the workspace; default the workspace itself"},` +
			`"glob":{"type":"string","maxLength":` + fmt.Sprint(MaxPatternBytes) + `,"description":"Only search files matching this pattern: without a / it matches the file name (*.go), with one the workspace-relative path (src/**/*.ts); ` + patternBounds + `"},` +
			`"case_insensitive":{"type":"boolean","description":"Ignore letter case; default false"}},` +
			`"required":["pattern"],"additionalProperties":false}`),
		ParallelSafe: true,
		ReadOnly:     true,
		Execute:      c.grep,
	}
}

// grepRun is one search's tally.
type grepRun struct {
	c                    Config
	re                   *regexp.Regexp
	out                  strings.Builder
	shown, total, files  int
	binary, large, other int
	// br is reused for every file of the run.
	br *bufio.Reader
}

func (c Config) grep(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
	var args struct {
		Pattern         string `json:"pattern"`
		Path            string `json:"path"`
		Glob            string `json:"glob"`
		CaseInsensitive bool   `json:"case_insensitive"`
	}
	if err := decode(call, &args); err != nil {
		return fail(err)
	}
	if args.Pattern == "" {
		return failf("pattern is empty: give a regular expression")
	}
	expr := args.Pattern
	if args.CaseInsensitive {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return failf("pattern %s is not a valid Go regular expression: %v (RE2 syntax: no lookaround, no backreferences)", workspace.Quote(args.Pattern), bareRegexpError(err))
	}
	if args.Glob != "" {
		if msg := checkBounds(args.Glob); msg != "" {
			return failf("glob %s %s", workspace.Quote(args.Glob), msg)
		}
		if !doublestar.ValidatePattern(args.Glob) {
			return failf("glob %s is not a valid pattern (check its brackets and braces)", workspace.Quote(args.Glob))
		}
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
	st, err := p.root.Stat(rel)
	if err != nil {
		return fail(p.explain(err, args.Path))
	}
	g := &grepRun{c: c, re: re}
	w := &walker{ctx: ctx, fsys: p.root.FS(), max: c.WalkMaxEntries, skip: c.secretByName(p)}
	if !st.IsDir() {
		if !st.Mode().IsRegular() {
			return failf("%q is not a regular file (%v): grep searches regular files and folders", args.Path, st.Mode().Type())
		}
		// A file named outright is searched even if ignored; only a binary
		// one is refused.
		if why := g.file(ctx, p, rel); why != "" {
			return failf("%q %s", args.Path, why)
		}
	} else {
		err = w.walk(rel, func(rel string, d fs.DirEntry) error {
			if !d.Type().IsRegular() || !globMatch(args.Glob, rel) {
				return nil
			}
			g.file(ctx, p, rel)
			return nil
		})
		if err != nil && ctx.Err() == nil {
			return fail(p.explain(err, args.Path))
		}
	}
	if ctx.Err() != nil {
		return tools.Result{}, ctx.Err()
	}
	return tools.Result{Content: g.report(args.Pattern, w)}, nil
}

// globMatch applies grep's file filter: a pattern without "/" matches the
// file name, one with "/" the workspace-relative path.
func globMatch(glob, rel string) bool {
	if glob == "" {
		return true
	}
	target := rel
	if !strings.Contains(glob, "/") {
		target = path.Base(rel)
	}
	ok, _ := doublestar.Match(glob, target)
	return ok
}

// file searches one file, returning why it was skipped ("" when searched).
func (g *grepRun) file(ctx stdctx.Context, p *place, rel string) string {
	f, err := p.openRead(rel)
	if err != nil {
		g.other++
		return fmt.Sprintf("cannot be opened: %v", p.explain(err, rel))
	}
	defer f.Close()
	if e, ok := g.c.secret(p, rel, f); ok {
		return "is " + e.What + ", which dsh keeps from the model"
	}
	st, err := f.Stat()
	switch {
	case err != nil || !st.Mode().IsRegular():
		g.other++
		return "is not a regular file"
	case st.Size() > int64(g.c.MaxFileBytes):
		g.large++
		return fmt.Sprintf("is over grep's limit of %s", size(g.c.MaxFileBytes))
	}
	why, err := sniff(f)
	if err != nil {
		g.other++
		return fmt.Sprintf("cannot be read: %v", err)
	}
	if why != "" {
		g.binary++
		return fmt.Sprintf("looks like a binary file (%s); grep searches text files only", why)
	}
	if g.br == nil {
		g.br = bufio.NewReaderSize(f, 16<<10)
	} else {
		g.br.Reset(f)
	}
	hit := false
	linesFrom(g.br, grepScanLine, func(n int, text []byte, _ bool) bool {
		if !g.re.Match(text) {
			return true
		}
		hit = true
		g.total++
		if g.shown < g.c.GrepMaxMatches {
			g.shown++
			fmt.Fprintf(&g.out, "%s:%d: %s\n", rel, n, cutLine(string(text), g.c.GrepMaxLineBytes))
		}
		return ctx.Err() == nil
	})
	if hit {
		g.files++
	}
	return ""
}

func (g *grepRun) report(pattern string, w *walker) string {
	b := &g.out
	if g.total == 0 {
		fmt.Fprintf(b, "no matches for %q\n", pattern)
	} else if g.total > g.shown {
		fmt.Fprintf(b, "[%d more matching lines not shown (%d in %s in all); narrow with path or glob]\n",
			g.total-g.shown, g.total, plural(g.files, "file", "files"))
	}
	var skipped []string
	if g.binary > 0 {
		skipped = append(skipped, plural(g.binary, "binary file", "binary files"))
	}
	if g.large > 0 {
		skipped = append(skipped, fmt.Sprintf("%s over %s", plural(g.large, "file", "files"), size(g.c.MaxFileBytes)))
	}
	if g.other > 0 {
		skipped = append(skipped, plural(g.other, "unreadable file", "unreadable files"))
	}
	if len(skipped) > 0 {
		fmt.Fprintf(b, "[skipped: %s]\n", strings.Join(skipped, ", "))
	}
	if w.full {
		fmt.Fprintf(b, "[the search stopped after %d entries; narrow with path or glob]\n", g.c.WalkMaxEntries)
	}
	return b.String()
}

// bareRegexpError keeps what is wrong with a pattern and cuts the part of
// it the parser quotes, which may be the whole pattern.
func bareRegexpError(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return fmt.Sprintf("%s: %s", se.Code, workspace.Quote(se.Expr))
	}
	return err.Error()
}
