package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// init turns a process started by Attach into the sandboxed program
// before main, or a test binary's flag parsing, runs.
func init() {
	if len(os.Args) == 3 && os.Args[1] == marker {
		enter(os.Args[2])
	}
}

// versions are go-landlock's presets by ABI; each restricts everything its
// ABI can.
var versions = []landlock.Config{
	1: landlock.V1, 2: landlock.V2, 3: landlock.V3, 4: landlock.V4, 5: landlock.V5, 6: landlock.V6,
	7: landlock.V7, 8: landlock.V8, 9: landlock.V9, 10: landlock.V10, 11: landlock.V11,
}

// enter applies the rules and executes the program; it never returns.
func enter(arg string) {
	// The rules bind this thread only; the execve below must run on it,
	// and it must never run another goroutine after.
	runtime.LockOSThread()
	var s entrySpec
	if err := json.Unmarshal([]byte(arg), &s); err != nil {
		fmt.Fprintf(os.Stderr, "dsh sandbox: the entry argument is not valid: %v\n", err)
		os.Exit(exitEntryFailed)
	}
	report := os.NewFile(uintptr(s.ReportFD), "sandbox-report")
	// The report pipe is closed by a successful execve, so the parent
	// reads end-of-file; so is every descriptor after it, which the
	// command was not given: Landlock checks a file when it is opened, so
	// one dsh inherited open for writing would be a way out.
	err := closeFrom(s.ReportFD)
	if err == nil {
		err = restrict(s)
	}
	if err == nil {
		err = syscall.Exec(s.Path, s.Args, os.Environ())
		err = fmt.Errorf("executing %s: %w", s.Path, err)
	}
	if report != nil {
		_, _ = report.WriteString(err.Error())
	}
	os.Exit(exitEntryFailed)
}

// closeFrom marks every descriptor from fd on close-on-exec.
func closeFrom(fd int) error {
	if unix.CloseRange(uint(fd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return nil
	}
	// Before Linux 5.11: each open descriptor, as /proc lists it.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing the open descriptors to close them: %w", err)
	}
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= fd {
			syscall.CloseOnExec(n)
		}
	}
	return nil
}

// restrict enforces s on the calling thread, strictly at ABI s.ABI: a
// kernel that cannot is an error, never a weaker sandbox.
func restrict(s entrySpec) error {
	if s.ABI < 1 || s.ABI >= len(versions) {
		return fmt.Errorf("the Landlock ABI %d is not one this build knows (1 to %d)", s.ABI, len(versions)-1)
	}
	base := versions[s.ABI]
	cfg := landlock.Config{HandledAccessFS: base.HandledAccessFS, Scoped: base.Scoped}
	if s.Network {
		// Unix sockets outside (an ssh agent, a docker daemon) are
		// network too: open with the network.
		cfg.HandledAccessFS &^= ll.AccessFSResolveUnix
		cfg.Scoped &^= ll.ScopeAbstractUnixSocket
	} else {
		cfg.HandledAccessNet = base.HandledAccessNet
	}
	rw := landlock.RWDirs(s.Writable...)
	if s.ABI >= 2 {
		// Moving a file between two writable directories (git does) needs
		// the refer right, which Landlock denies by default.
		rw = rw.WithRefer()
	}
	fd, flags, err := cfg.NewRulesetFD(
		landlock.RODirs("/"),
		rw,
		landlock.RWFiles(devices...).IgnoreIfMissing(),
	)
	if err != nil {
		return fmt.Errorf("building the Landlock rules (ABI %d): %w", s.ABI, err)
	}
	if fd < 0 {
		return fmt.Errorf("the Landlock rules (ABI %d) restrict nothing", s.ABI)
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self (ABI %d): %w", s.ABI, err)
	}
	return nil
}
