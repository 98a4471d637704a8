package files

import (
	stdctx "context"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
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
	// skip leaves out an entry and, for a folder, all beneath it: the
	// paths dsh keeps secret.
	skip func(rel string) bool
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
	entries, err := w.readDir(dir)
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
		if ignored(stack, rel, e.IsDir()) || w.skip != nil && w.skip(rel) {
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

// readDir reads dir's entries sorted by name, but no more than the walk
// may still visit (and one to see it is over): a folder of a million
// entries must not be held in memory whole when the cap stops the walk
// after a few. A folder within the cap is read whole, in name order.
func (w *walker) readDir(dir string) ([]fs.DirEntry, error) {
	f, err := w.fsys.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, ok := f.(fs.ReadDirFile)
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: errors.New("not a folder")}
	}
	room := w.max - w.seen + 1
	var entries []fs.DirEntry
	for len(entries) < room {
		chunk, err := d.ReadDir(min(room-len(entries), 1024))
		entries = append(entries, chunk...)
		if errors.Is(err, io.EOF) || (err == nil && len(chunk) == 0) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}
