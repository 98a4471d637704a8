//go:build unix && !linux

package childproc

import "syscall"

// sysProcAttr puts the child in a group of its own. Outside Linux there is
// no parent-death signal; the host pipe is what tells a child dsh is gone.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// KillOwnGroup ends the calling process's group, itself included: what a
// child does once WatchHost says dsh is gone.
func KillOwnGroup() { _ = syscall.Kill(0, syscall.SIGKILL) }

// closeInheritedOnExec is Linux only for now; elsewhere inherited
// descriptors reach children as before.
func closeInheritedOnExec() {}
