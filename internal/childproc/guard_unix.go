//go:build unix

package childproc

import (
	"os"
	"os/exec"
	"syscall"
)

// startGuard starts the group watcher in the group of the child pid, with
// hostPipe (the read end of the host pipe) as its descriptor 3. The
// watcher is dsh's child but gets no parent-death signal, so it outlives a
// SIGKILLed dsh just long enough to kill the group. It is best effort:
// without /bin/sh the child runs unguarded, as before. Stop's kill of the
// group ends it with the child.
func startGuard(hostPipe *os.File, pid int) {
	sh := exec.Command("/bin/sh", "-c", groupWatcher)
	sh.ExtraFiles = []*os.File{hostPipe}
	sh.Env = []string{"PATH=/usr/bin:/bin"}
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pid}
	if err := sh.Start(); err != nil {
		return
	}
	go sh.Wait() //nolint:errcheck // it ends with the group
}
