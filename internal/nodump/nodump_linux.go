package nodump

import (
	"golang.org/x/sys/unix"

	"github.com/dsh-go/dsh/errs"
)

// Seal marks the calling process non-dumpable. Its own /proc/self entries
// that need ptrace rights (environ, mem, auxv) become root's too, and
// unreadable to it as an ordinary user; /proc/self/fd, exe, stat and maps
// stay usable, since the kernel lets a process inspect itself.
func Seal() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return errs.Wrap(errs.Internal, err, "prctl(PR_SET_DUMPABLE, 0): dsh cannot close its memory to its own user's processes")
	}
	return nil
}

// Sealed reports whether the calling process is non-dumpable.
func Sealed() bool {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return err == nil && v == 0
}
