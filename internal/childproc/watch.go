package childproc

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// WatchHost is the child's side of the host pipe: when the process was
// started by dsh with one, gone runs on a goroutine of its own as soon as
// dsh is gone, and WatchHost reports true. Elsewhere (started by hand, by
// another host) it does nothing and reports false.
//
// A write to stdout or stderr after dsh died raises SIGPIPE, whose default
// action would end the process before the pipe's end-of-file reached gone
// — and leave the process's own children running. So while watching,
// SIGPIPE is caught and ignored: the write fails with EPIPE instead, and
// only the pipe's end-of-file says dsh is gone. (A broken pipe or socket of
// the plugin's own raises SIGPIPE too; it must not end the plugin.)
func WatchHost(gone func()) bool {
	n, err := strconv.Atoi(os.Getenv(HostFDEnv))
	if err != nil || n < 3 {
		return false
	}
	if !isPipe(n) {
		return false // not the pipe dsh passed; leave the descriptor alone
	}
	f := os.NewFile(uintptr(n), "dsh-host")
	broken := make(chan os.Signal, 1)
	signal.Notify(broken, syscall.SIGPIPE)
	eof := make(chan struct{})
	go func() {
		// dsh never writes: any return means every write end is closed.
		var b [1]byte
		_, _ = f.Read(b[:])
		close(eof)
	}()
	go func() {
		for {
			select {
			case <-eof:
				signal.Stop(broken)
				gone()
				return
			case <-broken:
			}
		}
	}()
	// The goroutine above races the kernel: when dsh is SIGKILLed it
	// closes dsh's end of the pipe and SIGKILLs dsh's direct child in an
	// order no goroutine of that child can rely on, and what the child
	// started would outlive it. A shell in this process's group watches
	// too; it is not dsh's child, so that signal does not reach it.
	startWatcher(f, nil)
	return true
}

// groupWatcher reads the host pipe (its descriptor 3) until end-of-file,
// then kills its process group: the watching process's group, which it
// joined by being started without a group of its own.
const groupWatcher = "read -r _ <&3; kill -KILL 0"

// startWatcher starts a /bin/sh running groupWatcher with hostPipe as its
// descriptor 3, in the process group attr names (nil: the caller's). It is
// best effort: without /bin/sh nothing starts. It has no stdio — dsh reads
// a child's stdout and stderr until they close, which must happen when the
// child exits — and ends with its group.
func startWatcher(hostPipe *os.File, attr *syscall.SysProcAttr) {
	sh := exec.Command("/bin/sh", "-c", groupWatcher)
	sh.ExtraFiles = []*os.File{hostPipe}
	sh.Env = []string{"PATH=/usr/bin:/bin"}
	sh.SysProcAttr = attr
	if err := sh.Start(); err != nil {
		return
	}
	go sh.Wait() //nolint:errcheck // it ends with the group
}
