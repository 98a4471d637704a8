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

// placeholder creates a missing protected path as an empty directory, so
// a read-only mount can cover it for the command's run (nothing can be
// created there, file or directory); it reports whether it made one. A
// path whose parent is missing is left: there is nothing to protect yet
// and nothing to mount on. So is one dsh itself may not create: the
// command, under dsh's uid or a lesser one, may not either.
func placeholder(p string) bool {
	if _, err := os.Lstat(p); err == nil {
		return false
	}
	if st, err := os.Stat(filepath.Dir(p)); err != nil || !st.IsDir() {
		return false
	}
	return os.Mkdir(p, placeholderMode) == nil
}

// removePlaceholders removes the placeholders this entry made; os.Remove
// leaves one that is no longer an empty directory.
func (e *Entry) removePlaceholders() {
	for _, p := range e.placeholders {
		if st, err := os.Lstat(p); err == nil && st.IsDir() {
			_ = os.Remove(p)
		}
	}
	e.placeholders = nil
}
