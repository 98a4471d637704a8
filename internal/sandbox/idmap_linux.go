package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"unsafe"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/sandbox/entry"
)

// Mount API calls the syscall package lacks.
const (
	sysOpenTree     = 428
	sysMountSetattr = 442
	openTreeClone   = 0x1
	atEmptyPath     = 0x1000
	mountAttrRdonly = 0x1
	mountAttrIdmap  = 0x100000
	atFdcwd         = -100
)

// usernses holds, per uid and gid, a user namespace mapping dsh's root to
// them: idmapped mounts take one, and it lives as long as dsh.
var usernses sync.Map // [2]int -> *usernsResult

type usernsResult struct {
	once sync.Once
	f    *os.File
	err  error
}

// idmapUserns returns a user namespace whose uid 0 and gid 0 are the
// kernel's uid and gid: an idmapped mount with it shows files root owns on
// disk as owned by uid, and writes uid's files to disk as root's.
func idmapUserns(uid, gid int) (*os.File, error) {
	v, _ := usernses.LoadOrStore([2]int{uid, gid}, &usernsResult{})
	res := v.(*usernsResult)
	res.once.Do(func() { res.f, res.err = newUserns(uid, gid) })
	return res.f, res.err
}

// newUserns starts a process in a new user namespace with the mapping,
// keeps a descriptor of the namespace and lets the process go. The process
// is a /bin/sh waiting for its stdin to close, a smaller start than dsh's
// own executable, which stands in where there is no /bin/sh.
func newUserns(uid, gid int) (*os.File, error) {
	cmd := exec.Command("/bin/sh", "-c", "read -r _")
	if _, err := os.Stat("/bin/sh"); err != nil {
		cmd = exec.Command(self, entry.HoldMarker)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: true,
		Pdeathsig:                  syscall.SIGKILL,
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, errs.Wrap(Unavailable, err, "sandbox: a pipe for the user namespace holder").WithReason("sandbox/no-idmap")
	}
	if err := cmd.Start(); err != nil {
		in.Close()
		return nil, errs.Wrap(Unavailable, err, "sandbox: creating a user namespace for idmapped mounts").WithReason("sandbox/no-idmap")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	in.Close()
	_ = cmd.Wait()
	if err != nil {
		return nil, errs.Wrap(Unavailable, err, "sandbox: opening the idmap user namespace").WithReason("sandbox/no-idmap")
	}
	return f, nil
}

// idmappedMount clones the mount at path (without the mounts beneath it)
// as a detached mount through ns, read-only when asked.
func idmappedMount(path string, ns *os.File, readOnly bool) (*os.File, error) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, "sandbox: "+path)
	}
	fdcwd := atFdcwd
	fd, _, e := syscall.Syscall(sysOpenTree, uintptr(fdcwd), uintptr(unsafe.Pointer(p)), openTreeClone|syscall.O_CLOEXEC)
	if e == syscall.ENOENT || e == syscall.ENOTDIR {
		return nil, errs.Wrap(errs.InvalidArgument, e, fmt.Sprintf("sandbox: the directory %s does not exist; create it, or take it out of sandbox.writable", path)).WithReason("sandbox/missing-directory")
	}
	if e != 0 {
		return nil, errs.Wrap(Unavailable, e, fmt.Sprintf("sandbox: cloning the mount of %s (open_tree)", path)).WithReason("sandbox/no-idmap")
	}
	attr := struct{ set, clr, propagation, userns uint64 }{set: mountAttrIdmap, userns: uint64(ns.Fd())}
	if readOnly {
		attr.set |= mountAttrRdonly
	}
	empty, _ := syscall.BytePtrFromString("")
	if _, _, e := syscall.Syscall6(sysMountSetattr, fd, uintptr(unsafe.Pointer(empty)), atEmptyPath,
		uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0); e != 0 {
		syscall.Close(int(fd))
		var st syscall.Statfs_t
		_ = syscall.Statfs(path, &st)
		return nil, errs.Wrap(Unavailable, e, fmt.Sprintf("sandbox: %s (file system type 0x%x) cannot be mounted idmapped, so a command cannot write it under another uid than root", path, st.Type)).WithReason("sandbox/no-idmap")
	}
	return os.NewFile(fd, "idmapped:"+path), nil
}
