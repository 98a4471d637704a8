//go:build unix

package hostwatch

import "syscall"

// KillOwnGroup ends the calling process's group, itself included: what a
// plugin does once Watch says dsh is gone.
func KillOwnGroup() { _ = syscall.Kill(0, syscall.SIGKILL) }

// isPipe reports whether fd is an open pipe.
func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}
