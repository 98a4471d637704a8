package files

import (
	stdctx "context"
	"errors"
	"io/fs"
	"path"
	"strings"
)

// errWalkFull stops a walk that reached its entry cap.
var errWalkFull = errors.New("walk cap reached")

// walker visits the files of a tree through the workspace's os.Root FS,
// as git would list them: .git skipped, .gitignore'd entries skipped (the
// .gitignore files of the start folder's ancestors and of every folder
// below), symlinks reported but never entered.
type walker struct {
	ctx  stdctx.Context
	fsys fs.FS
	max  int
	// seen counts the entries visited; full is set when max stopped the walk.
	seen int
	full bool
}

// walk calls fn for every non-folder entry under start (workspace-relative,
// "." for the workspace), in name order within each folder. fn's error
// stops the walk and is returned; the cap stops it quietly (see full).
func (w *walker) walk(start string, fn func(rel string, d fs.DirEntry) error) error {
	var stack []*ignoreFile
	dir := "."
	for _, part := range strings.Split(start, "/") {
		if part == "." || part == "" {
			continue
		}
		stack = w.loadIgnore(stack, dir)
		dir = path.Join(dir, part)
	}
	err := w.dir(start, stack, fn, true)
	if errors.Is(err, errWalkFull) {
		w.full = true
		return nil
	}
	return err
}

func (w *walker) loadIgnore(stack []*ignoreFile, dir string) []*ignoreFile {
	data, err := fs.ReadFile(w.fsys, path.Join(dir, ".gitignore"))
	if err != nil {
		return stack
	}
	// A fresh slice per folder: siblings must not share their rules.
	return append(stack[:len(stack):len(stack)], parseIgnore(dir, data))
}

func (w *walker) dir(dir string, stack []*ignoreFile, fn func(string, fs.DirEntry) error, top bool) error {
	entries, err := fs.ReadDir(w.fsys, dir)
	if err != nil {
		if top {
			return err
		}
		// A folder that cannot be read below the start is skipped, as
		// git and ripgrep do.
		return nil
	}
	stack = w.loadIgnore(stack, dir)
	for _, e := range entries {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if w.seen++; w.seen > w.max {
			return errWalkFull
		}
		if e.Name() == ".git" {
			continue
		}
		rel := path.Join(dir, e.Name())
		if ignored(stack, rel, e.IsDir()) {
			continue
		}
		if e.IsDir() {
			if err := w.dir(rel, stack, fn, false); err != nil {
				return err
			}
			continue
		}
		if err := fn(rel, e); err != nil {
			return err
		}
	}
	return nil
}
