package childproc

import (
	"os"
	"strconv"
)

// WatchHost is the child's side of the host pipe: when the process was
// started by dsh with one, gone runs on a goroutine of its own as soon as
// dsh is gone, and WatchHost reports true. Elsewhere (started by hand, by
// another host) it does nothing and reports false.
func WatchHost(gone func()) bool {
	n, err := strconv.Atoi(os.Getenv(HostFDEnv))
	if err != nil || n < 3 {
		return false
	}
	f := os.NewFile(uintptr(n), "dsh-host")
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return false // not the pipe dsh passed; leave the descriptor alone
	}
	go func() {
		// dsh never writes: any return means every write end is closed.
		var b [1]byte
		_, _ = f.Read(b[:])
		gone()
	}()
	return true
}
