package nodump

import "syscall"

// Seal marks the calling process non-dumpable; what it returns is the
// error of prctl, which the caller may only log.
func Seal() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		return e
	}
	return nil
}
