package sandbox

import (
	"os"
	"path/filepath"
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
// It returns what it created, outermost first: nothing for a path that
// exists, lies in no writable directory, or lies beneath something that
// is not a directory (nothing can be created there). A path dsh itself may
// not create is left: the command, under dsh's uid or a lesser one, may
// not create it either.
func placeholder(p string, writable []string) []string {
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	root := ""
	for _, w := range writable {
		if len(p) > len(w)+1 && p[:len(w)+1] == w+"/" && len(w) > len(root) {
			root = w
		}
	}
	if root == "" {
		return nil
	}
	var missing []string
	for d := filepath.Dir(p); len(d) > len(root); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			if st, err := os.Stat(d); err != nil || !st.IsDir() {
				return nil
			}
			break
		}
		missing = append(missing, d)
	}
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		if os.Mkdir(missing[i], 0o755) != nil {
			return made
		}
		made = append(made, missing[i])
	}
	if os.Mkdir(p, placeholderMode) == nil {
		made = append(made, p)
	}
	return made
}

// removePlaceholders removes what placeholder made for this entry, the
// deepest first; os.Remove leaves a directory that is no longer empty
// (the command put something in a parent it was free to write).
func (e *Entry) removePlaceholders() {
	for i := len(e.placeholders) - 1; i >= 0; i-- {
		p := e.placeholders[i]
		if st, err := os.Lstat(p); err == nil && st.IsDir() {
			_ = os.Remove(p)
		}
	}
	e.placeholders = nil
}
