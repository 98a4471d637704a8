//go:build unix

package childproc

import (
	"os"
	"syscall"
)

// startGuard starts the group watcher in the group of the child pid. The
// watcher is dsh's child but gets no parent-death signal, so it outlives a
// SIGKILLed dsh just long enough to kill the group; Stop's kill of the
// group ends it with the child. Without /bin/sh the child runs unguarded.
func startGuard(hostPipe *os.File, pid int) {
	startWatcher(hostPipe, &syscall.SysProcAttr{Setpgid: true, Pgid: pid})
}
