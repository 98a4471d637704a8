//go:build unix

package childproc

import "syscall"

// isPipe reports whether fd is an open pipe. It asks fstat rather than an
// *os.File, whose finalizer would close a descriptor that is not ours.
func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}
