package sandbox

import (
	"os"
	"path/filepath"
	"sync"
)

// placeholderMode is a placeholder's: an empty directory, read-only even
// on disk. A directory rather than a file even for a file's name: git and
// most tools ignore an empty directory, where an empty AGENTS.md would be
// listed as untracked and swept into the next `git add -A`.
const placeholderMode = 0o555

// placeholder creates a missing protected path p as an empty directory,
// so a read-only mount can cover it for the command's run (nothing can be
// created there, file or directory), and creates first, as plain
// directories, its parents missing beneath the writable directory holding
// it: were a parent left missing, the command could make it and then the
// path, as `mkdir .git && echo ... > .git/config` would in a workspace
// without a repository. The entry pins those parents (a mount point
// cannot be renamed or removed), so the way to the placeholder stays.
//
// It returns what it made, or shares with a run still using it, outermost
// first: nothing for a path that exists, lies in no writable directory, or
// lies beneath something that is not a directory (nothing can be created
// there). A path dsh itself may
// not create is left: the command, under dsh's uid or a lesser one, may
// not create it either.
func placeholder(p string, writable []string) []string {
	held.Lock()
	defer held.Unlock()
	root := ""
	for _, w := range writable {
		if len(p) > len(w)+1 && p[:len(w)+1] == w+"/" && len(w) > len(root) {
			root = w
		}
	}
	if root == "" {
		return nil
	}
	defer writeJournal(root)
	// Everything is made and looked at through the writable directory,
	// dsh's own uid (root's, often) included: a command may have left a
	// symlink on the way (sub/.git -> /etc/sudoers.d), and a commondir
	// made through it would land outside, as root. os.Root refuses a way
	// that leaves the directory.
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil
	}
	defer r.Close()
	rel := func(d string) string { return d[len(root)+1:] }
	// The way down, outermost last: each missing or held by another
	// run's placeholder; it stops at the first directory of the tree's
	// own.
	var way []string
	for d := p; len(d) > len(root); d = filepath.Dir(d) {
		if _, err := r.Lstat(rel(d)); err == nil && held.n[d] == 0 {
			if d == p {
				return nil
			}
			if st, err := r.Stat(rel(d)); err != nil || !st.IsDir() {
				return nil
			}
			break
		} else if err != nil && !os.IsNotExist(err) && held.n[d] == 0 {
			return nil // out of the directory, or not to be looked at
		}
		way = append(way, d)
	}
	writeJournal(root, way...)
	var made []string
	for i := len(way) - 1; i >= 0; i-- {
		d := way[i]
		if held.n[d] == 0 {
			mode := os.FileMode(0o755)
			if d == p {
				mode = placeholderMode
			}
			if d == p && filepath.Base(p) == "commondir" {
				if makeCommondir(r, rel(p)) != nil {
					return made
				}
			} else if r.Mkdir(rel(d), mode) != nil {
				return made
			}
		}
		held.n[d]++
		held.root[d] = root
		made = append(made, d)
	}
	return made
}

// makeCommondir creates the placeholder of a missing git commondir: not
// an empty directory, which git fails to read (`fatal: failed to read
// .git/commondir`) even in a repository that never had one, but the file
// naming the repository itself, which git reads as no redirect at all.
func makeCommondir(r *os.Root, p string) error {
	f, err := r.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	_, err = f.WriteString(".\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = r.Remove(p)
	}
	return err
}

// held counts, per path placeholder made, the runs using it: commands run
// side by side in one workspace share a placeholder, and the first to end
// must not remove it from under the others (removing a mount point
// detaches the mount in every namespace, which would uncover the path).
var held = struct {
	sync.Mutex
	n map[string]int
	// root is the writable directory each was made in, through which
	// it is removed.
	root map[string]string
}{n: map[string]int{}, root: map[string]string{}}

// removePlaceholders lets go of what placeholder made for this entry and
// removes, the deepest first, what no other run holds; os.Remove leaves a
// directory that is no longer empty (the command put something in a
// parent it was free to write).
func (e *Entry) removePlaceholders() {
	held.Lock()
	defer held.Unlock()
	for i := len(e.placeholders) - 1; i >= 0; i-- {
		p := e.placeholders[i]
		if held.n[p]--; held.n[p] > 0 {
			continue
		}
		delete(held.n, p)
		root := held.root[p]
		delete(held.root, p)
		// Through the writable directory: a way swapped for a symlink
		// since (by a command running beside this one) must not turn
		// this into a removal elsewhere.
		r, err := os.OpenRoot(root)
		if err != nil {
			continue
		}
		rel := p[len(root)+1:]
		if st, err := r.Lstat(rel); err == nil && (st.IsDir() || st.Mode().IsRegular()) {
			_ = r.Remove(rel)
		}
		r.Close()
	}
	e.placeholders = nil
	writeJournal("")
}
