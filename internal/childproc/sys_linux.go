package childproc

import "syscall"

// sysProcAttr puts the child in a group of its own and has the kernel kill
// it when dsh dies, even by SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// KillOwnGroup ends the calling process's group, itself included: what a
// child does once WatchHost says dsh is gone.
func KillOwnGroup() { _ = syscall.Kill(0, syscall.SIGKILL) }
