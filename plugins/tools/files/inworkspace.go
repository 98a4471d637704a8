package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/tools/internal/workspace"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/tools"
)

// ReadInWorkspace reads the file arg names under the same rules as the
// file tools — relative to the workspace ws (absolute, or "" for the working
// directory), no ".." or symlink out of it, regular files only — for
// entry points that take paths a person typed in a session (an @path
// mention). It returns the bytes and the file's name; a file over max
// bytes is refused with code attachments.TooLarge before it is read whole.
func ReadInWorkspace(ws, arg string, max int64) ([]byte, string, error) {
	p, err := enter(tools.Call{Workspace: ws})
	if err != nil {
		return nil, "", err
	}
	defer p.close()
	rel, err := p.rel(arg)
	if err != nil {
		return nil, "", err
	}
	if err := p.special(rel, arg); err != nil {
		return nil, "", err
	}
	f, err := p.openRead(rel)
	if errors.Is(err, fs.ErrNotExist) && !workspace.Escaped(err) {
		// Kept in the chain: a caller may take a missing file for text.
		return nil, "", errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("%q does not exist in the workspace %s", arg, p.dir))
	}
	if err != nil {
		return nil, "", p.explain(err, arg)
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, "", p.explain(err, arg)
	case !st.Mode().IsRegular():
		return nil, "", errs.New(errs.InvalidArgument, fmt.Sprintf("%q is not a regular file; only files can be attached", arg))
	case max > 0 && st.Size() > max:
		return nil, "", errs.New(attachments.TooLarge, fmt.Sprintf("%q is %d bytes, over the attachment limit of %d bytes", arg, st.Size(), max))
	}
	data, err := io.ReadAll(io.LimitReader(f, st.Size()+1))
	if err != nil {
		return nil, "", p.explain(err, arg)
	}
	return data, path.Base(rel), nil
}
