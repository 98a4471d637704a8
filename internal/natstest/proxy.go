package natstest

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy relays TCP connections to a server, and can be frozen: the bytes
// stop flowing both ways while every connection stays open. That is a
// host that stalled or was cut off by the network, as its peers see it —
// its requests time out, its leases run out — without the clean
// disconnect a stopped server or a closed connection would give, after
// which a client reconnects elsewhere at once.
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu     sync.Mutex
	thawed chan struct{} // closed while bytes flow
	conns  map[net.Conn]bool
	done   chan struct{} // closed at cleanup
	wg     sync.WaitGroup
}

// NewProxy relays a loopback port to the server at url (nats://host:port
// or host:port) until the test ends; its connections are closed and its
// goroutines waited for then.
func NewProxy(t testing.TB, url string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: no free loopback port for a proxy: %v", err)
	}
	p := &Proxy{t: t, ln: ln, target: strings.TrimPrefix(url, "nats://"),
		thawed: make(chan struct{}), conns: map[net.Conn]bool{}, done: make(chan struct{})}
	close(p.thawed)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is where clients connect to reach the server through the proxy.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Freeze stops the bytes of every connection, current and future, until
// Thaw. A write already under way may still arrive.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default: // frozen already
	}
}

// Thaw lets the bytes flow again; what was held back arrives first.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed at cleanup
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue // the client sees its connection refused, as without the proxy
		}
		p.mu.Lock()
		select {
		case <-p.done:
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		default:
		}
		p.conns[client], p.conns[server] = true, true
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(server, client)
		go p.pipe(client, server)
	}
}

// pipe copies src to dst while thawed; either side ending closes both, so
// the other direction's pipe ends too.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer p.drop(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.flowing() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// flowing waits while the proxy is frozen; false when it is closing.
func (p *Proxy) flowing() bool {
	p.mu.Lock()
	thawed := p.thawed
	p.mu.Unlock()
	select {
	case <-thawed:
		return true
	case <-p.done:
		return false
	}
}

func (p *Proxy) drop(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) close() {
	p.mu.Lock()
	close(p.done)
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	if err := p.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		p.t.Errorf("natstest: closing the proxy's listener: %v", err)
	}
	p.wg.Wait()
}
