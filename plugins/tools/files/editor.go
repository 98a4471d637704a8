package files

import (
	stdctx "context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dsh-go/dsh/services/editor"
)

// The file tools read and write through the editor a call carries (see
// package editor) once the path has passed the same confinement as a disk
// access; the disk checks that guard a write (a regular file, one name)
// still run first, since the editor writes that same file.

// abs is rel's absolute path, the name an editor knows a file by.
func (p *place) abs(rel string) string { return filepath.Join(p.dir, filepath.FromSlash(rel)) }

// fromEditor returns rel's text as the call's editor holds it; ok is false
// when there is no editor or it cannot say, and the disk decides.
func (p *place) fromEditor(ctx stdctx.Context, rel string) (text string, ok bool) {
	ed, has := editor.From(ctx)
	if !has {
		return "", false
	}
	text, err := ed.ReadTextFile(ctx, p.abs(rel))
	return text, err == nil
}

// toEditor writes text to rel through the call's editor; handled is false
// when there is no editor or it does not write files, and the disk takes
// the write.
func (p *place) toEditor(ctx stdctx.Context, rel, text string) (handled bool, err error) {
	ed, has := editor.From(ctx)
	if !has {
		return false, nil
	}
	if err := ed.WriteTextFile(ctx, p.abs(rel), text); errors.Is(err, editor.ErrNotOffered) {
		return false, nil
	} else if err != nil {
		return true, err
	}
	return true, nil
}

// existing checks rel on disk the way writeFile would before replacing
// it: missing is fine (exists false), otherwise a regular file with one
// name.
func (p *place) existing(rel string) (exists bool, err error) {
	f, err := p.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	return true, replaceable(f)
}
