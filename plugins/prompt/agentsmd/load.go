package agentsmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/dsh-go/dsh/errs"
)

// Codes of the package. A file that fails is skipped and logged with one
// of them; it never fails an agent.
const (
	// Unreadable: a candidate file exists but cannot be read (permissions,
	// an I/O error, a directory under the name).
	Unreadable errs.Code = "AGENTSMD_UNREADABLE"
	// Binary: a candidate file holds a NUL byte or is not UTF-8.
	Binary errs.Code = "AGENTSMD_BINARY"
	// Outside: a candidate file is a symlink that leads outside the
	// project (the repository root, or the workspace without one).
	Outside errs.Code = "AGENTSMD_OUTSIDE"
)

// layout is where an agent's instruction files may be: the project
// directory (top) and every directory from it down to the workspace.
type layout struct {
	top string // the repository root, or the workspace without one; real path
	ws  string // the workspace, real path
	// cands are the candidate files, directory by directory from top
	// down to the workspace; within a directory, in the order of names.
	cands []candidate
}

type candidate struct {
	dir  int    // index of the directory, 0 for top
	abs  string // absolute path
	rel  string // path from top, slash-separated: what the root opens
	name string
}

// discover lays out the candidates for workspace ws. The project top is
// the nearest directory at or above ws holding a .git entry (a directory,
// or a file as in a worktree); the search never climbs above the user's
// home when ws lies inside it. Without a repository, top is ws: no
// directory above the workspace is read.
func discover(ws string, names []string, home string) (layout, error) {
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return layout{}, errs.Wrap(Unreadable, err, fmt.Sprintf("the workspace %s cannot be resolved", ws))
	}
	real = filepath.Clean(real)
	if home != "" {
		if h, err := filepath.EvalSymlinks(home); err == nil {
			home = filepath.Clean(h)
		}
		if !inside(home, real) {
			home = "" // a workspace outside home: search up to the filesystem root
		}
	}
	top := real
	for d := real; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			top = d
			break
		}
		parent := filepath.Dir(d)
		if d == home || parent == d {
			break
		}
		d = parent
	}
	var dirs []string
	for d := real; ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == top {
			break
		}
	}
	l := layout{top: top, ws: real}
	for i := len(dirs) - 1; i >= 0; i-- {
		for _, n := range names {
			abs := filepath.Join(dirs[i], n)
			rel, _ := filepath.Rel(top, abs)
			l.cands = append(l.cands, candidate{dir: len(dirs) - 1 - i, abs: abs, rel: filepath.ToSlash(rel), name: n})
		}
	}
	return l, nil
}

// inside reports whether p is dir or lies under it (both clean, absolute).
func inside(dir, p string) bool {
	r, err := filepath.Rel(dir, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
}

// stamp is what the per-turn check compares: per candidate, whether it
// exists and its size and modification time. os.Stat follows symlinks, so
// an edit of a link's target shows too.
type stamp struct {
	ok    bool
	size  int64
	mtime int64 // UnixNano
}

// stat takes the prints of l's candidates into into (reused) and reports
// whether they differ from what into held.
func (l *layout) stat(into []stamp) ([]stamp, bool) {
	changed := len(into) != len(l.cands)
	if changed {
		into = make([]stamp, len(l.cands))
	}
	for i, c := range l.cands {
		var p stamp
		if fi, err := os.Stat(c.abs); err == nil {
			p = stamp{ok: true, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
		}
		if p != into[i] {
			into[i], changed = p, true
		}
	}
	return into, changed
}

// file is one instruction file as it goes into the prompt.
type file struct {
	label string // path from top, slash-separated
	text  string // the content, cut to its share of the caps
	size  int64  // the file's full size
	cut   string // why text is short ("" when whole): the key of the cap
}

// logFn receives a skipped file and why.
type logFn func(path string, err error)

// read reads the file each directory contributes — the first of the names
// that is a regular file — through an os.Root at top, so a symlink that
// leads outside top is refused at open. The files come back top first.
// Caps are shared out nearest first: the workspace's file gets up to
// maxFile bytes of maxTotal, then its parent's from what is left, and so
// on; a file with nothing left is kept with an empty text and the note.
func (l *layout) read(maxFile, maxTotal int, skip logFn) []file {
	root, err := os.OpenRoot(l.top)
	if err != nil {
		skip(l.top, errs.Wrap(Unreadable, err, "the project directory cannot be opened"))
		return nil
	}
	defer root.Close()

	// One file per directory, chosen top down but read nearest first.
	var chosen []candidate
	taken := -1
	for _, c := range l.cands {
		if c.dir == taken {
			continue
		}
		fi, err := root.Stat(c.rel)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			skip(c.abs, explain(err, c.abs))
			continue
		}
		if !fi.Mode().IsRegular() {
			skip(c.abs, errs.New(Unreadable, fmt.Sprintf("%s is not a regular file", c.abs)))
			continue
		}
		chosen = append(chosen, c)
		taken = c.dir
	}
	out := make([]file, 0, len(chosen))
	left := maxTotal
	for i := len(chosen) - 1; i >= 0; i-- {
		c := chosen[i]
		f, err := readOne(root, c, min(maxFile, left), maxFile < left)
		if err != nil {
			skip(c.abs, err)
			continue
		}
		if len(strings.TrimSpace(f.text)) == 0 && f.cut == "" {
			continue // an empty file says nothing
		}
		left -= len(f.text)
		out = append(out, f)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// readOne reads at most limit bytes of c. fileCap says whether the limit
// is the per-file cap (true) or what remains of the total.
func readOne(root *os.Root, c candidate, limit int, fileCap bool) (file, error) {
	fh, err := root.Open(c.rel)
	if err != nil {
		return file{}, explain(err, c.abs)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return file{}, errs.Wrap(Unreadable, err, fmt.Sprintf("%s cannot be read", c.abs))
	}
	// One byte past the limit tells a cut file from one that fits, also
	// when the file grew after the stat.
	buf, err := io.ReadAll(io.LimitReader(fh, int64(limit)+1))
	if err != nil {
		return file{}, errs.Wrap(Unreadable, err, fmt.Sprintf("%s cannot be read", c.abs))
	}
	if bytes.IndexByte(buf, 0) >= 0 {
		return file{}, errs.New(Binary, fmt.Sprintf("%s holds a NUL byte: a binary file is no instruction file", c.abs))
	}
	f := file{label: c.rel, size: max(fi.Size(), int64(len(buf)))}
	if len(buf) > limit {
		buf = cutAt(buf[:limit])
		f.cut = "max_bytes"
		if fileCap {
			f.cut = "max_file_bytes"
		}
	}
	if !utf8.Valid(buf) {
		return file{}, errs.New(Binary, fmt.Sprintf("%s is not UTF-8 text", c.abs))
	}
	f.text = string(buf)
	return f, nil
}

// cutAt shortens b to a whole line when one ends in its last quarter, and
// otherwise to a whole UTF-8 character.
func cutAt(b []byte) []byte {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 && i >= len(b)*3/4 {
		return b[:i+1]
	}
	for n := 0; n < utf8.UTFMax && len(b) > 0; n++ {
		r, size := utf8.DecodeLastRune(b)
		if r != utf8.RuneError || size > 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// explain turns an os.Root error into one with the package's codes.
func explain(err error, abs string) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return errs.Wrap(Outside, err, fmt.Sprintf("%s is a symlink that leads outside the project; it is not read", abs))
		}
	}
	return errs.Wrap(Unreadable, err, fmt.Sprintf("%s cannot be read", abs))
}

// render makes the prompt section of files, "" when there are none.
func render(l *layout, files []file) string {
	if len(files) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Project instructions\n\n")
	b.WriteString("The files below hold instructions for this project, from the project root down to the workspace")
	if rel, _ := filepath.Rel(l.top, l.ws); rel != "." {
		fmt.Fprintf(&b, " (%s/)", filepath.ToSlash(rel))
	}
	b.WriteString(". Follow them; where two disagree, the later file, nearer the workspace, wins.")
	for _, f := range files {
		fmt.Fprintf(&b, "\n\n## %s\n\n", f.label)
		b.WriteString(strings.TrimRight(f.text, "\n"))
		if f.cut != "" {
			if f.text != "" {
				b.WriteString("\n\n")
			}
			fmt.Fprintf(&b, "[dsh: %s cut to %d of its %d bytes by the %s cap; the rest is not shown]", f.label, len(f.text), f.size, f.cut)
		}
	}
	return b.String()
}
