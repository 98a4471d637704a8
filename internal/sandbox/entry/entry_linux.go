package entry

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// init turns a process started by sandbox.Attach into the sandboxed
// program before main, or a test binary's flag parsing, runs.
func init() {
	if len(os.Args) == 3 && os.Args[1] == Marker {
		run(os.Args[2])
	}
	if len(os.Args) == 2 && os.Args[1] == HoldMarker {
		var b [512]byte
		for {
			if n, err := os.Stdin.Read(b[:]); n == 0 || err != nil {
				os.Exit(0)
			}
		}
	}
}

// run sets up the sandbox and executes the program; it never returns.
func run(arg string) {
	// Capabilities, Landlock, no_new_privs and the parent-death signal
	// bind this thread; the execve below must run on it. In an init
	// function this is the main thread.
	runtime.LockOSThread()
	var s Spec
	if err := json.Unmarshal([]byte(arg), &s); err != nil {
		fmt.Fprintf(os.Stderr, "dsh sandbox: the entry argument is not valid: %v\n", err)
		os.Exit(ExitFailed)
	}
	err := enter(&s)
	if err == nil && s.Path == "" {
		// A probe: the sandbox could be entered; there is nothing to run.
		os.Exit(0)
	}
	if err == nil {
		err = syscall.Exec(s.Path, s.Args, commandEnv(os.Environ()))
		err = fmt.Errorf("executing %s: %w", s.Path, err)
	}
	msg := append([]byte{MsgError}, err.Error()...)
	_ = syscall.Sendmsg(s.CtlFD, msg, nil, nil, 0)
	os.Exit(ExitFailed)
}

// hostFDEnv is childproc.HostFDEnv (not imported: the entry runs before
// main and keeps its dependencies few).
const hostFDEnv = "DSH_HOST_FD"

// commandEnv is the command's environment: env without the variable that
// names the host pipe, which is closed in the sandbox; a program that
// trusted it would read whatever descriptor 3 is by then.
func commandEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, hostFDEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// enter does everything short of the execve.
func enter(s *Spec) error {
	if err := dropTerminal(); err != nil {
		return err
	}
	if s.Namespaces {
		if err := isolate(s); err != nil {
			return err
		}
	}
	// The control socket is closed by a successful execve, so the parent
	// reads end-of-file; so is every descriptor but stdin, stdout and
	// stderr: those dsh inherited (Landlock checks a file when it is
	// opened, so one open for writing would be a way out), and those the
	// launcher passed below the socket (the host pipe of childproc, the
	// mounts), which the command has no use for: the sandbox ends with
	// dsh by its parent-death signal and PID namespace, or by the
	// launcher's guard.
	if err := closeFrom(3); err != nil {
		return err
	}
	if err := prctl(prSetNoNewPrivs, 1); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if s.NoUnix {
		if err := refuseUnixSockets(); err != nil {
			return err
		}
	}
	// ABI 0: namespaces without Landlock, which the parent accepted.
	if s.ABI != 0 || !s.Namespaces {
		if err := restrict(s); err != nil {
			return err
		}
	}
	if s.Namespaces {
		if err := becomeUser(s); err != nil {
			return err
		}
		if err := dropCapabilities(); err != nil {
			return err
		}
	}
	return nil
}

// isolate builds the view of a namespaced sandbox: everything read-only
// but the writable directories, the protected paths read-only again
// inside them, a /proc of the new PID namespace, the network asked for.
func isolate(s *Spec) error {
	if s.MapSelf {
		if err := mapSelf(s.UID, s.GID); err != nil {
			return err
		}
	}
	// Nothing done in this mount namespace may reach dsh's.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	mounts := make([]detached, 0, len(s.Mounts))
	for _, m := range s.Mounts {
		d := detached{path: m.Path, fd: m.FD}
		if d.fd == 0 {
			fd, err := openTree(-1, m.Path, openTreeClone|atRecursive)
			if err != nil {
				return fmt.Errorf("cloning the mount of %s: %w", m.Path, err)
			}
			d.fd = fd
		}
		mounts = append(mounts, d)
	}
	if err := setAttr(-1, "/", atRecursive, mountAttrRdonly); err != nil {
		return fmt.Errorf("making every mount read-only: %w", err)
	}
	// Masks first: every mount beneath one needs its mount point there.
	for _, m := range s.Masks {
		if err := mask(m, mounts, s.Reach); err != nil {
			return err
		}
	}
	// Outermost first: a writable directory may lie inside another.
	sort.SliceStable(mounts, func(i, j int) bool { return len(mounts[i].path) < len(mounts[j].path) })
	for _, d := range mounts {
		if err := moveMount(d.fd, d.path); err != nil {
			return fmt.Errorf("attaching %s: %w", d.path, err)
		}
		syscall.Close(d.fd)
	}
	for _, p := range s.ReadOnly {
		if err := readOnly(p); err != nil {
			return err
		}
	}
	if err := hide(s.Hidden); err != nil {
		return err
	}
	// A covered path is safe only while its directory stays where it is:
	// `mv .git .git-old; mkdir .git` would put a fresh, writable
	// .git/config in its place. A mount point cannot be renamed or
	// removed, so each directory between a writable one and a covered
	// path is mounted over itself, deepest first (each clone carries the
	// mounts beneath it).
	for _, d := range pinned(s.ReadOnly, s.Writable) {
		if err := pin(d); err != nil {
			return err
		}
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc of the new PID namespace: %w", err)
	}
	// A shared-memory directory of the sandbox's own, as the IPC
	// namespace is; where there is none, shm_open simply fails.
	_ = syscall.Mount("tmpfs", "/dev/shm", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777")
	if s.Network == NetProxied {
		if err := proxyListener(s.CtlFD, s.ProxyPort); err != nil {
			return err
		}
	}
	if s.Dir != "" {
		if err := syscall.Chdir(s.Dir); err != nil {
			return fmt.Errorf("entering the working directory %s: %w", s.Dir, err)
		}
	}
	return nil
}

type detached struct {
	path string
	fd   int
}

// readOnly mounts p over itself read-only, so the command can change
// neither it nor (for a directory) anything beneath it. A path that cannot
// exist is skipped: missing, or beneath a file (.git/config where .git is
// a worktree's `gitdir:` file, which is covered under its own name).
func readOnly(p string) error {
	fd, err := openTree(-1, p, openTreeClone|atRecursive)
	if err == syscall.ENOENT || err == syscall.ENOTDIR {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cloning the protected path %s: %w", p, err)
	}
	defer syscall.Close(fd)
	if err := setAttr(fd, "", atEmptyPath|atRecursive, mountAttrRdonly); err != nil {
		return fmt.Errorf("making the protected path %s read-only: %w", p, err)
	}
	if err := moveMount(fd, p); err != nil {
		return fmt.Errorf("mounting the protected path %s read-only: %w", p, err)
	}
	return nil
}

// pinned are the directories strictly between a writable directory and a
// covered path, deepest first.
func pinned(readOnly, writable []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range readOnly {
		root := ""
		for _, w := range writable {
			if strings.HasPrefix(p, w+"/") && len(w) > len(root) {
				root = w
			}
		}
		if root == "" {
			continue
		}
		for d := filepath.Dir(p); len(d) > len(root); d = filepath.Dir(d) {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// pin mounts directory d over itself, with what is mounted beneath it.
func pin(d string) error {
	fd, err := openTree(-1, d, openTreeClone|atRecursive)
	if err == syscall.ENOENT || err == syscall.ENOTDIR {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cloning %s to pin it: %w", d, err)
	}
	defer syscall.Close(fd)
	if err := moveMount(fd, d); err != nil {
		return fmt.Errorf("pinning %s: %w", d, err)
	}
	return nil
}

// mapSelf maps the user namespace's uid and gid to the same ids outside,
// from inside: the one mapping a process without privilege outside may
// write, and only after refusing setgroups.
func mapSelf(uid, gid int) error {
	for _, w := range []struct{ file, text string }{
		{"/proc/self/setgroups", "deny"},
		{"/proc/self/uid_map", fmt.Sprintf("%d %d 1\n", uid, uid)},
		{"/proc/self/gid_map", fmt.Sprintf("%d %d 1\n", gid, gid)},
	} {
		if err := os.WriteFile(w.file, []byte(w.text), 0); err != nil {
			return fmt.Errorf("mapping the command's ids in its user namespace: %w", err)
		}
	}
	return nil
}

// becomeUser takes the uid and gid the command runs as, and asks again
// for the parent-death signal, which a change of uid clears.
func becomeUser(s *Spec) error {
	if s.SetGroups {
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			return fmt.Errorf("setgroups: %w", e)
		}
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, uintptr(s.GID), uintptr(s.GID), uintptr(s.GID)); e != 0 {
		return fmt.Errorf("setresgid(%d): %w", s.GID, e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(s.UID), uintptr(s.UID), uintptr(s.UID)); e != 0 {
		return fmt.Errorf("setresuid(%d): %w", s.UID, e)
	}
	if err := prctl(syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL)); err != nil {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
	}
	// dsh may have died before the signal was asked for again; its end
	// of the control socket is then closed.
	fds := []pollFd{{fd: int32(s.CtlFD), events: pollRdHup}}
	if n, _ := poll(fds); n > 0 && fds[0].revents&(pollHup|pollRdHup) != 0 {
		return fmt.Errorf("dsh is gone")
	}
	return nil
}

// closeFrom marks every descriptor from fd on close-on-exec.
func closeFrom(fd int) error {
	if _, _, e := syscall.Syscall(sysCloseRange, uintptr(fd), ^uintptr(0), closeRangeCloexec); e == 0 {
		return nil
	}
	// Before Linux 5.11: each open descriptor, as /proc lists it.
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing the open descriptors to close them: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("listing the open descriptors to close them: %w", err)
	}
	for _, name := range names {
		if n, err := strconv.Atoi(name); err == nil && n >= fd {
			syscall.CloseOnExec(n)
		}
	}
	return nil
}

func prctl(option int, arg uintptr) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, uintptr(option), arg, 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}
