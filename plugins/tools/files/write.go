package files

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/dsh-go/dsh/plugins/tools/internal/workspace"
	"github.com/dsh-go/dsh/services/editor"
	"github.com/dsh-go/dsh/services/tools"
)

func (c Config) writeTool() tools.Tool {
	return tools.Tool{
		Name: "write",
		Description: "Create a file in the workspace, or replace its whole content. Missing parent folders are made. " +
			"To change part of an existing file, prefer edit.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"File to write, relative to the workspace (an absolute path must lie inside it)"},` +
			`"content":{"type":"string","description":"The file's full new content"}},` +
			`"required":["path","content"],"additionalProperties":false}`),
		Execute: c.write,
	}
}

func (c Config) write(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
	var args struct {
		Path    *string `json:"path"`
		Content *string `json:"content"`
	}
	if err := decode(call, &args); err != nil {
		return fail(err)
	}
	if args.Path == nil || *args.Path == "" || args.Content == nil {
		return failf("write needs path and content (content may be an empty string)")
	}
	p, err := enter(call)
	if err != nil {
		return fail(err)
	}
	defer p.close()
	rel, err := p.rel(*args.Path)
	if err != nil {
		return fail(err)
	}
	if isRoot(rel) {
		return failf("%s names the workspace itself; give a file path", workspace.Quote(*args.Path))
	}
	approved, r, ok := c.allowWrite(ctx, call, p, rel, *args.Path)
	if !ok {
		return r, nil
	}
	if dir := path.Dir(rel); dir != "." {
		if err := p.root.MkdirAll(dir, 0o755); err != nil {
			return fail(p.explain(err, *args.Path))
		}
	}
	if err := p.special(rel, *args.Path); err != nil {
		return fail(err)
	}
	created, err := p.writeText(ctx, rel, *args.Content, c.rechecker(p, approved))
	if err != nil {
		return fail(p.explain(err, *args.Path))
	}
	verb := "replaced"
	if created {
		verb = "created"
	}
	return tools.Result{Content: fmt.Sprintf("%s %s (%s)", verb, rel, plural(len(*args.Content), "byte", "bytes"))}, nil
}

// writeText writes text to rel, through the call's editor when it has one
// (after the disk checks writeFile makes), or to the disk.
func (p *place) writeText(ctx stdctx.Context, rel, text string, check func(*os.File) error) (created bool, err error) {
	if _, has := editor.From(ctx); has {
		exists, err := p.existing(rel)
		if err != nil {
			return false, err
		}
		if handled, err := p.toEditor(ctx, rel, text); handled {
			return !exists, err
		}
	}
	return writeFile(p.root, rel, []byte(text), check)
}

// writeFile writes data to rel through root, telling whether it made the
// file. An existing file keeps its mode. Creation uses O_EXCL, so "created"
// never hides a replacement; a symlink in place is followed by os.Root,
// which refuses it when it leads outside. check, when set, judges the
// opened file before anything in it changes; a file it refuses that this
// call created is removed again.
func writeFile(root *os.Root, rel string, data []byte, check func(*os.File) error) (created bool, err error) {
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	created = err == nil
	if created && check != nil {
		if err = check(f); err != nil {
			f.Close()
			root.Remove(rel)
			return false, err
		}
	}
	if errors.Is(err, fs.ErrExist) {
		// Opened without O_TRUNC: the file is checked before anything in
		// it changes.
		f, err = root.OpenFile(rel, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			if check != nil {
				err = check(f)
			}
			if err == nil {
				err = replaceable(f)
			}
			if err == nil {
				err = f.Truncate(0)
			}
			if err != nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return false, err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	return created, errors.Join(werr, cerr)
}

// errLinked refuses a file with more than one name. os.Root keeps paths
// inside the workspace, but a hard link is the same file under another
// name, possibly outside it: writing through it would change that file.
var errLinked = errors.New("has more than one hard link; writing through it would also change the file under its other names, which may be outside the workspace, so the file tools leave it alone")

// replaceable checks an existing file before write replaces it: a regular
// file with one name.
func replaceable(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("is not a regular file (%v): the file tools handle regular files and folders only", st.Mode().Type())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		return errLinked
	}
	return nil
}
