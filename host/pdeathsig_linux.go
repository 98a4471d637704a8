package host

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the plugin when the host dies,
// even by SIGKILL, so no plugin outlives it.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
