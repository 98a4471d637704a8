// Package hostwatch is a plugin's side of the host pipe: dsh passes every
// child the read end of a pipe whose only write end dsh holds, and the pipe
// reads end-of-file the moment dsh is gone, however it died. A plugin that
// watches it ends its whole process group then, so the processes it started
// do not outlive dsh.
//
// dsh's own side (creating the pipe, passing it) is internal/childproc in
// the dsh module; this is a copy of the child's half only, so the SDK does
// not depend on dsh. The variable's name is the contract between the two,
// and a test in cmd/dsh holds them equal.
package hostwatch

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// HostFDEnv names the variable that gives a child the number of the host
// pipe's read end.
const HostFDEnv = "DSH_HOST_FD"

// Watch runs gone on a goroutine of its own as soon as dsh is gone, and
// reports true, when the process was started by dsh with a host pipe.
// Elsewhere (started by hand, by a test, by another host) it does nothing
// and reports false.
//
// A write to stdout or stderr after dsh died raises SIGPIPE, whose default
// action would end the process before the pipe's end-of-file reached gone
// and leave the process's own children running. So while watching, SIGPIPE
// is caught and ignored: the write fails with EPIPE instead, and only the
// pipe's end-of-file says dsh is gone.
func Watch(gone func()) bool {
	n, err := strconv.Atoi(os.Getenv(HostFDEnv))
	if err != nil || n < 3 {
		return false
	}
	if !isPipe(n) {
		// Not the pipe dsh passed: leave the descriptor alone. (An
		// *os.File made to look at it would close it when collected.)
		return false
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
	// When dsh is SIGKILLed the kernel may kill this process (its
	// parent-death signal) before the goroutine above runs, and what it
	// started would outlive it. A shell in this process's group watches
	// too; it is not dsh's child, so that signal does not reach it.
	startWatcher(f)
	return true
}

// groupWatcher reads the host pipe (its descriptor 3) until end-of-file,
// then kills its process group, which it shares with the plugin.
const groupWatcher = "read -r _ <&3; kill -KILL 0"

// startWatcher starts /bin/sh running groupWatcher, best effort: without
// /bin/sh nothing starts. It has no stdio, because dsh reads a child's
// stdout and stderr until they close, which must happen when the plugin
// exits; it ends with its group.
func startWatcher(hostPipe *os.File) {
	sh := exec.Command("/bin/sh", "-c", groupWatcher)
	sh.ExtraFiles = []*os.File{hostPipe}
	sh.Env = []string{"PATH=/usr/bin:/bin"}
	if err := sh.Start(); err != nil {
		return
	}
	go sh.Wait() //nolint:errcheck // it ends with the group
}
