//go:build !unix

package childproc

import (
	"os"
	"syscall"
)

// sysProcAttr has no process groups to set up outside Unix.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup can only end the child itself outside Unix.
func signalGroup(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// KillOwnGroup ends the calling process outside Unix, which has no groups.
func KillOwnGroup() { os.Exit(1) }

func closeInheritedOnExec() {}

// startGuard has no process groups to join outside Unix.
func startGuard(*os.File, int) {}
