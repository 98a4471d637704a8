//go:build !linux

package host

import "os/exec"

// setParentDeathSignal has no portable equivalent outside Linux; there the
// host's own shutdown kills its plugins.
func setParentDeathSignal(*exec.Cmd) {}
