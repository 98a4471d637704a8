package entry

import (
	"fmt"
	"syscall"
	"unsafe"
)

// Landlock's system calls and rights, as in linux/landlock.h.
const (
	sysLandlockCreateRuleset = 444
	sysLandlockAddRule       = 445
	sysLandlockRestrictSelf  = 446

	ruleTypePathBeneath = 1

	accessExecute     = 1 << 0
	accessWriteFile   = 1 << 1
	accessReadFile    = 1 << 2
	accessReadDir     = 1 << 3
	accessRefer       = 1 << 13
	accessTruncate    = 1 << 14
	accessIoctlDev    = 1 << 15
	accessResolveUnix = 1 << 16

	scopeAbstractUnix = 1 << 0

	abiNetwork = 4
	abiScoped  = 6
)

// fsRights are the file-system rights each ABI handles, by ABI.
var fsRights = []uint64{0, 1<<13 - 1, 1<<14 - 1, 1<<15 - 1, 1<<15 - 1, 1<<16 - 1, 1<<16 - 1, 1<<16 - 1, 1<<16 - 1, 1<<17 - 1, 1<<17 - 1, 1<<17 - 1}

// netRights are the network rights each ABI handles, from ABI 4 on.
func netRights(abi int) uint64 {
	switch {
	case abi >= 10:
		return 1<<4 - 1
	case abi >= abiNetwork:
		return 1<<2 - 1
	}
	return 0
}

// rulesetAttr is struct landlock_ruleset_attr up to the scopes.
type rulesetAttr struct {
	fs, net, scoped uint64
}

// pathBeneath is struct landlock_path_beneath_attr, which is packed.
type pathBeneath struct {
	allowed uint64
	fd      int32
}

// restrict enforces s's rules on the calling thread, strictly at ABI
// s.ABI: reads and execution everywhere, writes beneath s.Writable and to
// the devices; with the network off, what the ABI can refuse. A kernel
// that cannot is an error, never a weaker sandbox.
func restrict(s *Spec) error {
	if s.ABI < 1 || s.ABI >= len(fsRights) {
		return fmt.Errorf("the Landlock ABI %d is not one this build knows (1 to %d)", s.ABI, len(fsRights)-1)
	}
	attr := rulesetAttr{fs: fsRights[s.ABI]}
	if s.ABI >= abiScoped {
		attr.scoped = 1<<2 - 1
	}
	switch s.Network {
	case NetOn:
		// Unix sockets outside (an ssh agent, a docker daemon) are
		// network too: open with the network.
		attr.fs &^= accessResolveUnix
		attr.scoped &^= scopeAbstractUnix
	case NetProxied:
		// The network namespace has loopback only; TCP to the proxy must
		// pass. Unix sockets made outside stay refused: they cross
		// network namespaces.
	default:
		attr.net = netRights(s.ABI)
	}
	size := unsafe.Sizeof(attr)
	if s.ABI < abiScoped {
		size = 16
	}
	if s.ABI < abiNetwork {
		size = 8
	}
	rfd, _, e := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset (ABI %d): %w", s.ABI, e)
	}
	defer syscall.Close(int(rfd))
	read := uint64(accessExecute | accessReadFile | accessReadDir)
	if err := addRule(int(rfd), "/", read, true); err != nil {
		return err
	}
	for _, w := range s.Writable {
		if err := addRule(int(rfd), w, attr.fs, true); err != nil {
			return err
		}
	}
	file := uint64(accessExecute|accessWriteFile|accessReadFile|accessTruncate|accessIoctlDev) & attr.fs
	for _, d := range Devices {
		if err := addRule(int(rfd), d, file, false); err != nil {
			return err
		}
	}
	if _, _, e := syscall.Syscall(sysLandlockRestrictSelf, rfd, 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self (ABI %d): %w", s.ABI, e)
	}
	return nil
}

// addRule allows rights beneath path; a missing path is an error when
// required.
func addRule(rfd int, path string, rights uint64, required bool) error {
	fd, err := syscall.Open(path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		if !required {
			return nil
		}
		return fmt.Errorf("opening %s for a Landlock rule: %w", path, err)
	}
	defer syscall.Close(fd)
	pb := pathBeneath{allowed: rights, fd: int32(fd)}
	// The kernel's struct is packed: 12 bytes, not Go's 16.
	var raw [12]byte
	*(*uint64)(unsafe.Pointer(&raw[0])) = pb.allowed
	*(*int32)(unsafe.Pointer(&raw[8])) = pb.fd
	if _, _, e := syscall.Syscall6(sysLandlockAddRule, uintptr(rfd), ruleTypePathBeneath, uintptr(unsafe.Pointer(&raw[0])), 0, 0, 0); e != 0 {
		return fmt.Errorf("adding the Landlock rule for %s: %w", path, e)
	}
	return nil
}
