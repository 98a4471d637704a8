package sandbox

import (
	"errors"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// kernelABI mirrors go-landlock's own detection, erratum included, so the
// ABI the parent chooses is the one the child's strict enforcement sees.
func kernelABI() (int, string) {
	v, err := ll.LandlockGetABIVersion()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return 0, "this kernel was built without Landlock (CONFIG_SECURITY_LANDLOCK)"
	case errors.Is(err, syscall.EOPNOTSUPP):
		return 0, "Landlock is not enabled at boot (add landlock to the lsm= kernel parameter)"
	case err != nil:
		return 0, "probing Landlock failed: " + err.Error()
	case v <= 0:
		return 0, "the kernel reports no Landlock ABI"
	}
	if v >= abiScoped {
		// Kernels before the signal-scoping fix (erratum 2) are treated
		// as ABI 5, as go-landlock does.
		if e, err := ll.LandlockGetErrata(); err != nil || e&0x2 == 0 {
			v = abiScoped - 1
		}
	}
	return v, ""
}
