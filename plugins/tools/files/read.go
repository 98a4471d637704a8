package files

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/dsh-go/dsh/services/tools"
)

func (c Config) readTool() tools.Tool {
	return tools.Tool{
		Name: "read",
		Description: fmt.Sprintf("Read a text file in the workspace. Lines come numbered like `cat -n` (line number, tab, text); the numbers are not part of the file. "+
			"Returns at most %d lines and %s per call; lines longer than %d bytes are cut. Use offset and limit to read part of a file; "+
			"when the output is cut, a note at the end gives the offset to continue from. Binary files are refused.",
			c.ReadMaxLines, size(c.ReadMaxBytes), c.MaxLineBytes),
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"path":{"type":"string","description":"File to read, relative to the workspace (an absolute path must lie inside it)"},`+
			`"offset":{"type":"integer","minimum":1,"description":"First line to return, 1-based; default 1"},`+
			`"limit":{"type":"integer","minimum":1,"description":"Most lines to return; default and maximum %d"}},`+
			`"required":["path"],"additionalProperties":false}`, c.ReadMaxLines)),
		ParallelSafe: true,
		ReadOnly:     true,
		Execute:      c.read,
	}
}

func (c Config) read(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
	var args struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := decode(call, &args); err != nil {
		return fail(err)
	}
	if args.Path == "" {
		return failf("path is empty: name the file to read")
	}
	if args.Offset < 0 || args.Limit < 0 {
		return failf("offset and limit must be positive line counts (offset is 1-based)")
	}
	offset, limit := max(args.Offset, 1), c.ReadMaxLines
	if args.Limit > 0 {
		limit = min(args.Limit, c.ReadMaxLines)
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
	if e, ok := c.secret(p, rel, nil); ok {
		return fail(secretErr(args.Path, e))
	}
	if err := p.special(rel, args.Path); err != nil {
		return fail(err)
	}
	var src io.Reader
	if text, ok := p.fromEditor(ctx, rel); ok {
		if why := binaryReason([]byte(text[:min(len(text), sniffBytes)]), len(text) <= sniffBytes); why != "" {
			return failf("%q looks like a binary file (%s); read shows text files only", args.Path, why)
		}
		src = strings.NewReader(text)
	} else {
		f, err := p.openRead(rel)
		if err != nil {
			return fail(p.explain(err, args.Path))
		}
		defer f.Close()
		if e, ok := c.secret(p, rel, f); ok {
			return fail(secretErr(args.Path, e))
		}
		st, err := f.Stat()
		if err != nil {
			return fail(p.explain(err, args.Path))
		} else if st.IsDir() {
			return failf("%q is a directory; use list to see its entries", args.Path)
		} else if !st.Mode().IsRegular() {
			return failf("%q is not a regular file (%v): the file tools handle regular files and folders only", args.Path, st.Mode().Type())
		}
		if why, err := sniff(f); err != nil {
			return fail(p.explain(err, args.Path))
		} else if why != "" {
			if r, ok, err := readImage(f, st.Size(), args.Path); ok || err != nil {
				return r, err
			}
			return failf("%q looks like a binary file (%s); read shows text files only", args.Path, why)
		}
		src = f
	}

	var out strings.Builder
	last, bytes, note := 0, 0, ""
	err = lines(src, c.MaxLineBytes, func(n int, text []byte, cut bool) bool {
		if ctx.Err() != nil {
			return false
		}
		last = n
		if n < offset {
			return true
		}
		if n >= offset+limit {
			note = fmt.Sprintf("[showing lines %d-%d; the file goes on: call read with offset=%d to continue]", offset, n-1, n)
			return false
		}
		if bytes+len(text) > c.ReadMaxBytes && n > offset {
			note = fmt.Sprintf("[showing lines %d-%d: output cut at %s; call read with offset=%d to continue]", offset, n-1, size(c.ReadMaxBytes), n)
			return false
		}
		bytes += len(text)
		fmt.Fprintf(&out, "%6d\t%s", n, text)
		if cut {
			fmt.Fprintf(&out, "… [line %d is longer than %d bytes and was cut]", n, c.MaxLineBytes)
		}
		out.WriteByte('\n')
		return true
	})
	if ctx.Err() != nil {
		return tools.Result{}, ctx.Err()
	}
	if err != nil {
		return fail(p.explain(err, args.Path))
	}
	switch {
	case last == 0:
		return tools.Result{Content: fmt.Sprintf("(%q is empty)", args.Path)}, nil
	case offset > last:
		return failf("offset %d is past the end of %q, which has %s", offset, args.Path, plural(last, "line", "lines"))
	}
	if note != "" {
		out.WriteString(note)
		out.WriteByte('\n')
	}
	return tools.Result{Content: out.String()}, nil
}
