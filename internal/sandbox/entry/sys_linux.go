package entry

import (
	"syscall"
	"unsafe"
)

// System calls and constants the standard library's syscall package lacks
// (the numbers are the same on every architecture since Linux 5.1's
// unified table).
const (
	sysOpenTree     = 428
	sysMoveMount    = 429
	sysCloseRange   = 436
	sysMountSetattr = 442

	openTreeClone     = 0x1
	openTreeCloexec   = syscall.O_CLOEXEC
	atRecursive       = 0x8000
	atEmptyPath       = 0x1000
	moveMountFEmpty   = 0x4
	mountAttrRdonly   = 0x1
	closeRangeCloexec = 0x4

	oPath     = 0x200000
	pollHup   = 0x10
	pollRdHup = 0x2000
)

// openTree clones the mount tree at path into a detached mount.
func openTree(dirfd int, path string, flags int) (int, error) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return -1, err
	}
	fd, _, e := syscall.Syscall(sysOpenTree, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(flags|openTreeCloexec))
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// mountAttr is struct mount_attr.
type mountAttr struct {
	set, clr, propagation, userns uint64
}

// setAttr sets attributes on the mount at dirfd/path.
func setAttr(dirfd int, path string, flags int, set uint64) error {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	a := mountAttr{set: set}
	if _, _, e := syscall.Syscall6(sysMountSetattr, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(flags),
		uintptr(unsafe.Pointer(&a)), unsafe.Sizeof(a), 0); e != 0 {
		return e
	}
	return nil
}

// moveMount attaches the detached mount fd at path.
func moveMount(fd int, path string) error {
	empty, _ := syscall.BytePtrFromString("")
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	if _, _, e := syscall.Syscall6(sysMoveMount, uintptr(fd), uintptr(unsafe.Pointer(empty)), uintptr(atFdcwd),
		uintptr(unsafe.Pointer(p)), moveMountFEmpty, 0); e != 0 {
		return e
	}
	return nil
}

// atFdcwd is AT_FDCWD, a variable so it converts to uintptr.
var atFdcwd = -100

type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

// poll checks fds without waiting.
func poll(fds []pollFd) (int, error) {
	var zero syscall.Timespec
	n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
