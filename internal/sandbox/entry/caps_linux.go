package entry

import (
	"fmt"
	"syscall"
	"unsafe"
)

const (
	prSetNoNewPrivs      = 38
	prCapbsetDrop        = 24
	prCapAmbient         = 47
	prCapAmbientClearAll = 4
	capVersion3          = 0x20080522
	// lastCapCeiling bounds the loop over the bounding set; the kernel
	// answers EINVAL past its own last capability.
	lastCapCeiling = 64
)

type capHeader struct {
	version uint32
	pid     int32
}

type capData struct {
	effective, permitted, inheritable uint32
}

// dropCapabilities empties every capability set of this thread: the
// bounding set (so an execve as the namespace's root gains nothing), the
// ambient set, then effective, permitted and inheritable.
func dropCapabilities() error {
	for c := 0; c < lastCapCeiling; c++ {
		if err := prctl(prCapbsetDrop, uintptr(c)); err != nil {
			if err == syscall.EINVAL {
				break
			}
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("clearing the ambient capabilities: %w", e)
	}
	h := capHeader{version: capVersion3}
	var d [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&d[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return nil
}
