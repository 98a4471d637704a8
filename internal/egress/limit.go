package egress

import (
	"errors"
	"net"
	"sync"
)

// limitListener holds back Accept while MaxConns client connections are
// open, and registers each connection with the proxy so Close can reach
// it after net/http has handed it over (hijacked for a tunnel).
type limitListener struct {
	net.Listener
	p        *Proxy
	done     chan struct{}
	doneOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.p.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.p.sem
		return nil, err
	}
	cc := &clientConn{Conn: c, p: l.p}
	l.p.mu.Lock()
	closed := l.p.closed
	if !closed {
		l.p.conns[cc] = struct{}{}
	}
	l.p.mu.Unlock()
	if closed {
		cc.closeOnce.Do(func() { c.Close(); <-l.p.sem })
		return nil, net.ErrClosed
	}
	return cc, nil
}

func (l *limitListener) Close() error {
	l.doneOnce.Do(func() { close(l.done) })
	// Closing a listener its owner closed already is not a failure of
	// the proxy's Close.
	if err := l.Listener.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// clientConn is one client connection; closing it frees its slot.
type clientConn struct {
	net.Conn
	p         *Proxy
	closeOnce sync.Once
	err       error
}

func (c *clientConn) Close() error {
	c.closeOnce.Do(func() {
		c.err = c.Conn.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
		<-c.p.sem
	})
	return c.err
}

// CloseWrite half-closes a TCP client so a tunnel can pass on the
// upstream's end of stream while still reading.
func (c *clientConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
