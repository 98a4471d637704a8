package entry

import (
	"fmt"
	"syscall"
	"unsafe"
)

// Classic BPF and seccomp, as in linux/filter.h and linux/seccomp.h.
const (
	bpfLdWAbs  = 0x20       // BPF_LD | BPF_W | BPF_ABS (BPF_LD and BPF_W are 0)
	bpfJeqK    = 0x15       // BPF_JMP | BPF_JEQ | BPF_K
	bpfJsetK   = 0x45       // BPF_JMP | BPF_JSET | BPF_K
	bpfRetK    = 0x06       // BPF_RET | BPF_K
	retAllow   = 0x7fff0000 // SECCOMP_RET_ALLOW
	retErrno   = 0x00050000 // SECCOMP_RET_ERRNO
	prSeccomp  = 22         // PR_SET_SECCOMP
	modeFilter = 2          // SECCOMP_MODE_FILTER
	afUnix     = 1
	// Offsets in struct seccomp_data: the system call's number, the
	// architecture, the low half of the first argument (little endian).
	offNr   = 0
	offArch = 4
	offArg0 = 16
)

type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

type sockFprog struct {
	n      uint16
	filter *sockFilter
}

// unixFilter is the program of refuseUnixSockets: socket(AF_UNIX, ...) of
// this architecture fails with EACCES, as Landlock refuses; so do the
// socket calls of the 32-bit compatibility architecture (which may pass
// the domain behind a pointer, socketcall) and every call of x32, whose
// numbers are the native ones with a high bit set. io_uring_setup fails
// with ENOSYS, as where io_uring is disabled (programs fall back to
// system calls): an io_uring's socket and connect operations (Linux 5.19)
// are no system calls, so this filter would never see the unix socket they
// make. Everything else is allowed: it is Landlock and the namespaces that
// confine the rest.
func unixFilter() []sockFilter {
	deny, allow, noURing := uint8(13), uint8(12), uint8(14)
	at := func(i uint8, to uint8) uint8 { return to - i - 1 }
	return []sockFilter{
		/* 0 */ {bpfLdWAbs, 0, 0, offArch},
		/* 1 */ {bpfJeqK, 0, at(1, 8), nativeArch},
		/* 2 */ {bpfLdWAbs, 0, 0, offNr},
		/* 3 */ {bpfJsetK, at(3, deny), 0, x32Bit},
		/* 4 */ {bpfJeqK, at(4, noURing), 0, ioURingSetup},
		/* 5 */ {bpfJeqK, 0, at(5, allow), nativeSocket},
		/* 6 */ {bpfLdWAbs, 0, 0, offArg0},
		/* 7 */ {bpfJeqK, at(7, deny), at(7, allow), afUnix},
		/* 8 */ {bpfLdWAbs, 0, 0, offNr},
		/* 9 */ {bpfJeqK, at(9, deny), 0, compatSocketcall},
		/* 10 */ {bpfJeqK, at(10, deny), 0, compatSocket},
		/* 11 */ {bpfJeqK, at(11, noURing), 0, compatIOURingSetup},
		/* 12 */ {bpfRetK, 0, 0, retAllow},
		/* 13 */ {bpfRetK, 0, 0, retErrno | uint32(syscall.EACCES)},
		/* 14 */ {bpfRetK, 0, 0, retErrno | uint32(syscall.ENOSYS)},
	}
}

// refuseUnixSockets installs unixFilter on the calling thread, which
// passes it to the program it executes and everything that starts. It
// needs no_new_privs, set before.
func refuseUnixSockets() error {
	if !UnixFilter {
		return fmt.Errorf("no seccomp filter for unix sockets on this architecture")
	}
	f := unixFilter()
	prog := sockFprog{n: uint16(len(f)), filter: &f[0]}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSeccomp, modeFilter, uintptr(unsafe.Pointer(&prog)), 0, 0, 0); e != 0 {
		return fmt.Errorf("installing the seccomp filter that refuses unix sockets: %w", e)
	}
	return nil
}
