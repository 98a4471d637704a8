package files

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/dsh-go/dsh/plugins/tools/internal/workspace"
	"github.com/dsh-go/dsh/services/tools"
)

func (c Config) globTool() tools.Tool {
	return tools.Tool{
		Name: "glob",
		Description: fmt.Sprintf("Find files in the workspace by name pattern: * matches within a folder name, ** any number of folders, "+
			"? one character, [abc] a class, {a,b} alternatives; e.g. **/*.go or src/**/test_*.py. Files only (no folders), "+
			".git and .gitignore'd files skipped. Returns workspace-relative paths sorted by path, at most %d, with a count of the rest.",
			c.GlobMaxResults),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","minLength":1,"maxLength":` + fmt.Sprint(MaxPatternBytes) + `,"description":"Pattern matched against paths relative to path; ` + patternBounds + `"},` +
			`"path":{"type":"string","description":"Folder to search in, relative to the workspace; default the workspace itself"}},` +
			`"required":["pattern"],"additionalProperties":false}`),
		ParallelSafe: true,
		ReadOnly:     true,
		Execute:      c.glob,
	}
}

func (c Config) glob(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
	var args struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
	}
	if err := decode(call, &args); err != nil {
		return fail(err)
	}
	pattern := strings.TrimPrefix(args.Pattern, "./")
	if msg := checkPattern(pattern); msg != "" {
		return failf("pattern %s %s", workspace.Quote(args.Pattern), msg)
	}
	p, err := enter(call)
	if err != nil {
		return fail(err)
	}
	defer p.close()
	base, err := p.rel(args.Path)
	if err != nil {
		return fail(err)
	}
	// Walk only below the pattern's fixed leading folders.
	start := base
	if fixed, _ := doublestar.SplitPattern(pattern); fixed != "." {
		start = path.Join(base, fixed)
	}
	w := &walker{ctx: ctx, fsys: p.root.FS(), max: c.WalkMaxEntries, skip: c.secretByName(p)}
	var found []string
	err = w.walk(start, func(rel string, _ fs.DirEntry) error {
		sub := rel
		if base != "." {
			sub = strings.TrimPrefix(rel, base+"/")
		}
		if ok, _ := doublestar.Match(pattern, sub); ok {
			found = append(found, rel)
		}
		return nil
	})
	if ctx.Err() != nil {
		return tools.Result{}, ctx.Err()
	}
	if err != nil {
		if start != base && errors.Is(err, fs.ErrNotExist) {
			return tools.Result{Content: fmt.Sprintf("no files match %q", args.Pattern)}, nil
		}
		if start != base {
			return fail(p.explain(err, start))
		}
		return fail(p.explain(err, args.Path))
	}
	sort.Strings(found)
	var b strings.Builder
	for i, f := range found {
		if i == c.GlobMaxResults {
			fmt.Fprintf(&b, "[%d more matches not shown; narrow the pattern or path]\n", len(found)-i)
			break
		}
		b.WriteString(f)
		b.WriteByte('\n')
	}
	if len(found) == 0 {
		fmt.Fprintf(&b, "no files match %q\n", args.Pattern)
	}
	if w.full {
		fmt.Fprintf(&b, "[the search stopped after %d entries; narrow the pattern or path]\n", c.WalkMaxEntries)
	}
	return tools.Result{Content: b.String()}, nil
}

// checkPattern says what is wrong with a glob pattern, or "".
func checkPattern(p string) string {
	if msg := checkBounds(p); msg != "" {
		return msg
	}
	switch {
	case p == "":
		return "is empty"
	case strings.HasPrefix(p, "/"):
		return "is absolute; patterns are relative to path (default the workspace)"
	case !doublestar.ValidatePattern(p):
		return "is not a valid pattern (check its brackets and braces)"
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return `contains ".."; patterns must stay inside the workspace (set path to search elsewhere in it)`
		}
	}
	return ""
}
