package files

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/dsh-go/dsh/services/tools"
)

func (c Config) listTool() tools.Tool {
	return tools.Tool{
		Name: "list",
		Description: fmt.Sprintf("List the entries of a folder in the workspace, sorted by name: folders end with /, symlinks with @. "+
			"Shows everything, hidden and ignored files included; at most %d entries, with a count of the rest. Use glob to search deeper.", c.ListMaxEntries),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"Folder to list, relative to the workspace; default the workspace itself"}},` +
			`"additionalProperties":false}`),
		ParallelSafe: true,
		ReadOnly:     true,
		Execute:      c.list,
	}
}

func (c Config) list(_ stdctx.Context, call tools.Call) (tools.Result, error) {
	var args struct {
		Path string `json:"path"`
	}
	if err := decode(call, &args); err != nil {
		return fail(err)
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
	if err := p.special(rel, args.Path); err != nil {
		return fail(err)
	}
	f, err := p.root.Open(rel)
	if err != nil {
		return fail(p.explain(err, args.Path))
	}
	defer f.Close()
	if e, ok := c.secret(p, rel, f); ok {
		return fail(secretErr(args.Path, e))
	}
	if st, err := f.Stat(); err != nil {
		return fail(p.explain(err, args.Path))
	} else if !st.IsDir() {
		return failf("%q is a file, not a folder; use read to see it", args.Path)
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return fail(p.explain(err, args.Path))
	}
	skip := c.secretByName(p)
	entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool { return skip(path.Join(rel, e.Name())) })
	if len(entries) == 0 {
		return tools.Result{Content: fmt.Sprintf("(%s is empty)", rel+"/")}, nil
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var b strings.Builder
	for i, e := range entries {
		if i == c.ListMaxEntries {
			fmt.Fprintf(&b, "[%s not shown; list a subfolder or use glob to narrow]\n", plural(len(entries)-i, "more entry", "more entries"))
			break
		}
		b.WriteString(e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			b.WriteByte('@')
		case e.IsDir():
			b.WriteByte('/')
		}
		b.WriteByte('\n')
	}
	return tools.Result{Content: b.String()}, nil
}
