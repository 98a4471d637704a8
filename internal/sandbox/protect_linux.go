package sandbox

import (
	"os"
	"path/filepath"
)

// Placeholders of missing protected paths: empty, and read-only even on
// disk, so nothing mistakes them for content.
const (
	placeholderFlags  = os.O_CREATE | os.O_EXCL | os.O_WRONLY
	placeholderPerm   = 0o444
	placeholderDirMod = 0o555
)

// placeholder creates a missing protected path empty (a directory when
// dir), so a read-only mount can cover it for the command's run; it
// reports whether it made one. A path whose parent is missing is left:
// there is nothing to protect yet and nothing to mount on. So is one dsh
// itself may not create: the command, under dsh's uid or a lesser one,
// may not either.
func placeholder(p string, dir bool) bool {
	if _, err := os.Lstat(p); err == nil {
		return false
	}
	if st, err := os.Stat(filepath.Dir(p)); err != nil || !st.IsDir() {
		return false
	}
	if dir {
		return os.Mkdir(p, placeholderDirMod) == nil
	}
	f, err := os.OpenFile(p, placeholderFlags, placeholderPerm)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// removePlaceholders removes the placeholders this entry made, if they are
// still empty.
func (e *Entry) removePlaceholders() {
	for _, p := range e.placeholders {
		if st, err := os.Lstat(p); err == nil && (st.IsDir() || st.Size() == 0) {
			_ = os.Remove(p)
		}
	}
	e.placeholders = nil
}
