//go:build !linux

package nodump

// Seal does nothing where there is no PR_SET_DUMPABLE; docs/tools.md says
// what that leaves open.
func Seal() error { return nil }

// Sealed reports false: nothing was sealed.
func Sealed() bool { return false }
