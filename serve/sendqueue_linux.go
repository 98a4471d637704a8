package serve

import (
	"crypto/tls"
	"net"

	"golang.org/x/sys/unix"
)

// sendQueue returns what reads the bytes c's socket holds that its peer
// has not acknowledged (SIOCOUTQ), or nil for a connection that is not
// TCP. It sets the socket's send buffer to hold limit bytes and a last
// message past them: left to itself the kernel grows the buffer to
// megabytes for a client that reads nothing, or keeps it too small to
// ever reach limit.
func sendQueue(c net.Conn, limit int) func() (int, bool) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	tcp, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return nil
	}
	// The kernel doubles the size asked for, for its own bookkeeping;
	// the headroom covers a last message and what the bookkeeping of
	// small writes takes beyond that.
	if tcp.SetWriteBuffer(limit+64<<10) != nil {
		return nil
	}
	return func() (int, bool) {
		var n int
		var ierr error
		if err := raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || ierr != nil {
			return 0, false
		}
		return n, true
	}
}
