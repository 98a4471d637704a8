package childproc

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the child in a group of its own and has the kernel kill
// it when dsh dies, even by SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// KillOwnGroup ends the calling process's group, itself included: what a
// child does once WatchHost says dsh is gone.
func KillOwnGroup() { _ = syscall.Kill(0, syscall.SIGKILL) }

// closeInheritedOnExec keeps the descriptors dsh itself inherited from its
// parent (a shell's 7>>file, a service manager's sockets) out of every
// child. Go opens its own descriptors close-on-exec, but not those it was
// given, and a child handed a writable one could write where its config
// and sandbox never allowed. Marking them changes nothing for dsh itself;
// it is done at every start (one system call) rather than once, so a
// descriptor a library opened without close-on-exec later is caught too.
func closeInheritedOnExec() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Kernels before 5.11: one descriptor at a time.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
