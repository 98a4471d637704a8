package childproc

import (
	"os"
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
	f := os.NewFile(uintptr(n), "dsh-host")
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return false // not the pipe dsh passed; leave the descriptor alone
	}
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
	return true
}
