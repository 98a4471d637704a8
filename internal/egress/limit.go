package egress

import (
	"errors"
	"net"
	"sync"
)

// limitListener wraps one listener given to Serve. It holds back Accept
// while MaxConns client connections are open, and keeps the connections
// it accepted so that closing the listener can end them: net/http stops
// tracking a connection once it is hijacked for a tunnel.
type limitListener struct {
	net.Listener
	p        *Proxy
	done     chan struct{}
	doneOnce sync.Once

	// closed, conns and work are guarded by p.mu.
	closed bool
	conns  map[*clientConn]struct{}
	work   sync.WaitGroup // requests in flight on this listener's conns
}

func newLimitListener(p *Proxy, l net.Listener) *limitListener {
	return &limitListener{Listener: l, p: p, done: make(chan struct{}), conns: map[*clientConn]struct{}{}}
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
	cc := &clientConn{Conn: c, l: l}
	l.p.mu.Lock()
	ok := !l.p.closed && !l.closed
	if ok {
		l.p.conns[cc] = struct{}{}
		l.conns[cc] = struct{}{}
	}
	l.p.mu.Unlock()
	if !ok {
		cc.Close()
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

// shut ends what was accepted from l and waits for its requests, so no
// tunnel of a finished command outlives the listener it came through.
func (l *limitListener) shut() {
	l.Close()
	l.p.mu.Lock()
	l.closed = true
	conns := make([]*clientConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	l.work.Wait()
}

// clientConn is one client connection; closing it frees its slot.
type clientConn struct {
	net.Conn
	l         *limitListener
	closeOnce sync.Once
	err       error
}

func (c *clientConn) Close() error {
	c.closeOnce.Do(func() {
		c.err = c.Conn.Close()
		p := c.l.p
		p.mu.Lock()
		delete(p.conns, c)
		delete(c.l.conns, c)
		p.mu.Unlock()
		<-p.sem
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
