package sandbox

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/sandbox/entry"
)

// self is dsh's executable as the kernel knows it: it still works when the
// file was replaced or removed since dsh started (an upgrade).
var self = "/proc/self/exe"

// entryCaps are the capabilities, within its own user namespace, the entry
// needs to build the view (mounts, loopback) and take the command's uid;
// it drops them, and every other, before the command runs.
var entryCaps = []uintptr{
	0x15, // CAP_SYS_ADMIN
	0x7,  // CAP_SETUID
	0x6,  // CAP_SETGID
	0x8,  // CAP_SETPCAP
	0xc,  // CAP_NET_ADMIN
	// Through the idmapped mounts the entry, still root's uid, meets
	// directories owned by the command's uid; these two let it pass them.
	0x1, // CAP_DAC_OVERRIDE
	0x2, // CAP_DAC_READ_SEARCH
}

// Entry follows one child into the sandbox.
type Entry struct {
	// ctl is dsh's end of the control socket; childEnd and mounts are
	// dsh's copies of what the child inherits, closed once it started.
	ctl      int
	childEnd *os.File
	mounts   []*os.File
	proxied  bool
	// placeholders are the missing protected paths created for the run,
	// with the parents they lacked, outermost first; removed by Err.
	placeholders []string
	failure      string
	done         bool
}

// Attach rewrites cmd, prepared but not started, so that the process
// enters the sandbox of r (weakened as r.Accept allows where st cannot
// give all of it) and then runs cmd's program with cmd's arguments,
// environment, directory and files. It refuses rules st cannot enforce
// within r.Accept (see Status.Check).
//
// After cmd.Start, call Started; with NetworkProxied, Listener; after the
// process exited, Err says whether it ever ran the program.
func Attach(cmd *exec.Cmd, r Rules, st Status) (*Entry, error) {
	if err := st.Check(r); err != nil {
		return nil, err
	}
	if cmd.Process != nil {
		return nil, errs.New(errs.InvalidArgument, "sandbox.Attach: the command has already started")
	}
	return attach(cmd, r, st, st.Needed(r))
}

func attach(cmd *exec.Cmd, r Rules, st Status, weak Weaken) (*Entry, error) {
	path := cmd.Path
	if path == self {
		path = "" // a probe: enter, then exit
	} else if !filepath.IsAbs(path) {
		p, err := exec.LookPath(path)
		if err != nil {
			return nil, errs.Wrap(errs.InvalidArgument, err, "sandbox.Attach: cannot find "+path)
		}
		path = p
	}
	writable, err := absolute(r.Writable, "writable directory")
	if err != nil {
		return nil, err
	}
	spec := entry.Spec{
		ABI: st.ABI, Writable: writable, Network: netMode(r, weak), ProxyPort: r.proxyPort(),
		Path: path, Args: cmd.Args,
	}
	// Landlock before ABI 9 cannot tell a unix socket made outside from
	// one the command makes: with the network closed, the command gets
	// none (see entry.Spec.NoUnix).
	spec.NoUnix = spec.Network != entry.NetOn && st.ABI < abiUnix && entry.UnixFilter && !r.UnixSockets
	e := &Entry{ctl: -1, proxied: spec.Network == entry.NetProxied}
	if weak&NoNamespaces == 0 {
		if err := e.namespaces(cmd, r, weak, &spec); err != nil {
			e.release()
			return nil, err
		}
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		e.release()
		return nil, errs.Wrap(EntryFailed, err, "sandbox.Attach: creating the control socket")
	}
	e.ctl, e.childEnd = fds[0], os.NewFile(uintptr(fds[1]), "sandbox-ctl")
	cmd.ExtraFiles = append(cmd.ExtraFiles, e.childEnd)
	spec.CtlFD = 2 + len(cmd.ExtraFiles)
	arg, err := json.Marshal(spec)
	if err != nil {
		e.release()
		return nil, errs.Wrap(errs.Internal, err, "sandbox.Attach: encoding the entry")
	}
	cmd.Path = self
	cmd.Args = []string{"dsh-sandbox", entry.Marker, string(arg)}
	return e, nil
}

// namespaces asks for the new namespaces and prepares the view: the uid
// mapping, the writable directories (idmapped when dsh is root), the masks
// over directories only root may enter, the protected paths.
func (e *Entry) namespaces(cmd *exec.Cmd, r Rules, weak Weaken, spec *entry.Spec) error {
	spec.Namespaces = true
	attr := cmd.SysProcAttr
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	} else {
		c := *attr
		attr = &c
	}
	attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	if spec.Network != entry.NetOn {
		attr.Cloneflags |= syscall.CLONE_NEWNET
	}
	attr.AmbientCaps = entryCaps
	euid, egid := os.Geteuid(), os.Getegid()
	idmapped := euid == 0 && weak&SameUID == 0
	if idmapped {
		uid, gid := r.ids()
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = true
		spec.UID, spec.GID, spec.SetGroups = 0, 0, true
	} else if euid == 0 {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: egid, HostID: egid, Size: 1}}
		attr.GidMappingsEnableSetgroups = true
		spec.UID, spec.GID, spec.SetGroups = 0, egid, true
	} else {
		// An ordinary user's dsh is non-dumpable (internal/nodump), and so
		// is its child until the execve: the child's uid_map then belongs
		// to root, and dsh could not write it. The entry, dumpable again
		// once it runs, maps its own ids, as an unprivileged process may.
		spec.UID, spec.GID, spec.MapSelf = euid, egid, true
	}
	cmd.SysProcAttr = attr
	// The entry enters the directory once its mounts are in place: the
	// one it starts in is the old, read-only view, and with another uid
	// dsh's directory may not even be reachable.
	// Without a directory the command starts in dsh's, entered again for
	// the same reason.
	spec.Dir, cmd.Dir = cmd.Dir, ""
	if !filepath.IsAbs(spec.Dir) {
		if wd, err := os.Getwd(); err == nil {
			spec.Dir = filepath.Join(wd, spec.Dir)
		}
	}
	readOnly, err := absolute(r.ReadOnly, "read-only path")
	if err != nil {
		return err
	}
	readOnly = withSubmodules(readOnly)
	sweepStaleOnce()
	for _, p := range readOnly {
		if !beneathAny(p, spec.Writable) {
			continue // read-only already
		}
		e.placeholders = append(e.placeholders, placeholder(p, spec.Writable)...)
		spec.ReadOnly = append(spec.ReadOnly, p)
		// A protected name that is a symlink is covered where it stands;
		// its target, writable under its own name, is covered too.
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			if t, err := filepath.EvalSymlinks(p); err == nil && beneathAny(t, spec.Writable) {
				spec.ReadOnly = append(spec.ReadOnly, t)
			}
		}
	}
	hidden, err := absolute(r.Hidden, "hidden path")
	if err != nil {
		return err
	}
	spec.Hidden = hidden
	home := os.Getenv("HOME")
	if home != "" {
		home = filepath.Clean(home)
	}
	files, err := r.homeFiles(home, spec.Writable)
	if err != nil {
		return err
	}
	if !idmapped {
		// The command has dsh's own uid: it may read what dsh's user may,
		// and nothing is masked (see docs/tools.md, "Secrets").
		for _, w := range spec.Writable {
			spec.Mounts = append(spec.Mounts, entry.Mount{Path: w})
		}
		return nil
	}
	uid, gid := r.ids()
	ns, err := idmapUserns(uid, gid)
	if err != nil {
		return err
	}
	add := func(path string, readOnly bool) error {
		f, err := idmappedMount(path, ns, readOnly)
		if err != nil {
			return err
		}
		e.mounts = append(e.mounts, f)
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
		spec.Mounts = append(spec.Mounts, entry.Mount{Path: path, FD: 2 + len(cmd.ExtraFiles)})
		return nil
	}
	spec.Masks = masked(append(append([]string{}, spec.Writable...), home, spec.Dir), spec.Writable)
	// The working directory and $HOME, beneath a masked directory and
	// outside the writable ones, are reachable and empty; of $HOME the
	// command reads only the files it needs.
	for _, d := range []string{spec.Dir, home} {
		if d != "" && beneathAny(d, spec.Masks) && !beneathAny(d, spec.Writable) {
			spec.Reach = append(spec.Reach, d)
		}
	}
	if beneathAny(home, spec.Masks) {
		for _, f := range files {
			if err := add(f, true); err != nil {
				return err
			}
		}
	}
	for _, w := range spec.Writable {
		if err := add(w, false); err != nil {
			return err
		}
	}
	return nil
}

// absolute cleans paths, which must be absolute.
func absolute(paths []string, what string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("sandbox.Attach: the %s %q is not absolute", what, p))
		}
		out = append(out, filepath.Clean(p))
	}
	return out, nil
}

func beneathAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") || d == "/" {
			return true
		}
	}
	return false
}

// Started closes dsh's copies of what the child inherited; call it once
// cmd.Start returned, whether it failed or not.
func (e *Entry) Started() {
	e.childEnd.Close()
	for _, f := range e.mounts {
		f.Close()
	}
	e.mounts = nil
}

// release undoes an Attach that will not start.
func (e *Entry) release() {
	if e.childEnd != nil {
		e.childEnd.Close()
	}
	for _, f := range e.mounts {
		f.Close()
	}
	if e.ctl >= 0 {
		syscall.Close(e.ctl)
		e.ctl = -1
	}
	e.removePlaceholders()
}

// Listener is the proxy listener the child made inside its network
// namespace (NetworkProxied; nil otherwise): serve it until the command
// ended, then close it. It waits until the child made it or gave up.
func (e *Entry) Listener() (net.Listener, error) {
	if !e.proxied || e.done {
		return nil, nil
	}
	kind, text, fd, err := e.receive()
	switch {
	case err != nil:
		return nil, err
	case kind == entry.MsgListener && fd >= 0:
		f := os.NewFile(uintptr(fd), "sandbox-proxy")
		defer f.Close()
		l, err := net.FileListener(f)
		if err != nil {
			return nil, errs.Wrap(EntryFailed, err, "the sandbox's proxy listener")
		}
		return l, nil
	case kind == entry.MsgError:
		e.failure = text
	}
	return nil, errs.New(EntryFailed, "the command could not enter the sandbox, so it did not run: "+e.failureText())
}

// receive reads one message from the child: its kind, its text, the
// descriptor it carries (-1 if none); kind 0 at end-of-file.
func (e *Entry) receive() (byte, string, int, error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(4))
	for {
		n, oobn, _, _, err := syscall.Recvmsg(e.ctl, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, "", -1, errs.Wrap(EntryFailed, err, "reading the sandbox entry's report")
		}
		if n == 0 {
			e.done = true
			return 0, "", -1, nil
		}
		fd := -1
		if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
			if fds, err := syscall.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
				fd = fds[0]
			}
		}
		return buf[0], string(buf[1:n]), fd, nil
	}
}

func (e *Entry) failureText() string {
	if e.failure == "" {
		return "it exited before it was set up"
	}
	return strings.TrimSpace(e.failure)
}

// Err reads the child's report once the process exited: nil when it ran
// the program inside the sandbox, an EntryFailed error saying why when it
// did not. It removes the placeholders of missing protected paths and
// closes the control socket; call it once.
func (e *Entry) Err() error {
	defer e.release()
	e.childEnd.Close()
	for !e.done && e.failure == "" {
		kind, text, fd, err := e.receive()
		if err != nil {
			return err
		}
		if fd >= 0 {
			syscall.Close(fd)
		}
		if kind == entry.MsgError {
			e.failure = text
		}
	}
	if e.failure != "" {
		return errs.New(EntryFailed, "the command could not enter the sandbox, so it did not run: "+e.failureText())
	}
	return nil
}
