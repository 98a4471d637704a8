package egress_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/egress"
	"go.uber.org/goleak"
)

// echoServer answers every connection by echoing what it reads, until
// the test ends.
func echoServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// tunnel opens a CONNECT tunnel to target through the proxy and returns
// the connection ready to carry bytes.
func tunnel(t *testing.T, h *harness, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(c)
	status, _ := br.ReadString('\n')
	if !strings.Contains(status, " 200 ") {
		t.Fatalf("CONNECT %s: %q", target, status)
	}
	if blank, _ := br.ReadString('\n'); blank != "\r\n" {
		t.Fatalf("CONNECT %s: header line %q", target, blank)
	}
	return c, br
}

// Bytes sent right behind the CONNECT line, before the 200, reach the
// far side; a half-close travels through and the reply still comes back.
func TestTunnelPipelinedBytesAndHalfClose(t *testing.T) {
	echo := echoServer(t)
	h := startProxy(t, policy(t, []string{"127.0.0.1"}, nil), newDNS(), egress.Options{})
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "CONNECT "+echo+" HTTP/1.1\r\n\r\nearly bytes|")
	io.WriteString(c, "late bytes")
	c.(*net.TCPConn).CloseWrite()
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := "HTTP/1.1 200 Connection established\r\n\r\nearly bytes|late bytes"; string(all) != want {
		t.Fatalf("got %q, want %q", all, want)
	}
}

// Close ends open tunnels and returns; the clients see their connection
// closed, and goleak (TestMain) sees no goroutine left.
func TestCloseWithOpenTunnels(t *testing.T) {
	echo := echoServer(t)
	h := startProxy(t, policy(t, []string{"127.0.0.1"}, nil), newDNS(), egress.Options{})
	var conns []net.Conn
	for range 3 {
		c, br := tunnel(t, h, echo)
		io.WriteString(c, "ping\n")
		if line, _ := br.ReadString('\n'); line != "ping\n" {
			t.Fatalf("echo through the tunnel: %q", line)
		}
		conns = append(conns, c)
	}
	done := make(chan error, 1)
	go func() { done <- h.p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with tunnels open")
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("tunnel %d still open after Close (%d, %v)", i, n, err)
		}
	}
	if _, err := net.DialTimeout("tcp", h.addr, time.Second); err == nil {
		t.Errorf("the listener still accepts after Close")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Serve returns nil when its listener is closed by its owner.
func TestServeReturnsWhenListenerCloses(t *testing.T) {
	p := egress.New(egress.Policy{}, egress.Options{})
	defer p.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	// Make sure Serve is accepting before the listener goes.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	l.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its listener closed")
	}
	// Serve after Close returns at once and closes the listener.
	p.Close()
	l2, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := p.Serve(l2); err != nil {
		t.Errorf("Serve after Close: %v", err)
	}
	if _, err := l2.Accept(); err == nil {
		t.Errorf("Serve after Close left its listener open")
	}
}

// MaxConns caps open client connections, tunnels included: a further
// client is answered only once one closes.
func TestMaxConns(t *testing.T) {
	echo := echoServer(t)
	h := startProxy(t, policy(t, []string{"127.0.0.1"}, nil), newDNS(), egress.Options{MaxConns: 1})
	first, _ := tunnel(t, h, echo)
	second, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	io.WriteString(second, "CONNECT "+echo+" HTTP/1.1\r\n\r\n")
	second.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := second.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("a connection over the cap was answered (%d, %v)", n, err)
	}
	first.Close()
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	status, _ := bufio.NewReader(second).ReadString('\n')
	if !strings.Contains(status, " 200 ") {
		t.Fatalf("after the first closed, the second got %q", status)
	}
}

// A tunnel with no traffic either way is closed after TunnelIdleTimeout;
// one with traffic in one direction only is not.
func TestTunnelIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	echo := echoServer(t)
	h := startProxy(t, policy(t, []string{"127.0.0.1"}, nil), newDNS(), egress.Options{TunnelIdleTimeout: idle})

	// The proxy starts the idle clock while the tunnel is being set up,
	// so the test's clock starts before that.
	start := time.Now()
	quiet, _ := tunnel(t, h, echo)
	quiet.SetReadDeadline(time.Now().Add(10 * idle))
	if _, err := quiet.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("an idle tunnel was not closed: %v", err)
	}
	if d := time.Since(start); d < idle {
		t.Errorf("closed after %s, before the idle timeout", d)
	}

	// Upstream to client only: the client writes nothing after CONNECT,
	// yet the tunnel lives on while bytes keep coming back.
	// Gaps of a tenth of the idle time leave room for a loaded machine;
	// 25 of them outlast the idle time twice over.
	busy, br := tunnel(t, h, dripServer(t, 25, idle/10))
	busy.SetReadDeadline(time.Now().Add(20 * idle))
	for got := range 25 {
		if _, err := br.ReadByte(); err != nil {
			t.Fatalf("a tunnel busy one way closed after %d bytes: %v", got, err)
		}
	}
}

// dripServer writes n bytes to each connection, one every gap, reading
// nothing.
func dripServer(t *testing.T, n int, gap time.Duration) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				for range n {
					time.Sleep(gap)
					if _, err := c.Write([]byte{'x'}); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String()
}

// Close returns promptly while forwarded requests wait on a slow
// upstream: their contexts end with the proxy.
func TestCloseWithRequestsInFlight(t *testing.T) {
	arrived := make(chan struct{}, 8)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer up.Close()
	defer close(release)
	h := startProxy(t, policy(t, []string{"allowed.test"}, nil), newDNS("allowed.test", "127.0.0.1"), egress.Options{})
	c := h.client(t, nil)
	u := "http://allowed.test:" + port(t, up.Listener.Addr().String()) + "/slow"
	errc := make(chan error, 4)
	for range 4 {
		go func() {
			resp, err := c.Get(u)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
	}
	for range 4 {
		<-arrived
	}
	done := make(chan struct{})
	go func() { h.p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited on requests held by a slow upstream")
	}
	for range 4 {
		if err := <-errc; err == nil {
			t.Errorf("a request in flight got a response after Close")
		}
	}
}

// Many clients at once, over a small connection cap, mixing forwarded,
// refused and tunnelled requests: every one is answered.
func TestConcurrentClients(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	echo := echoServer(t)
	h := startProxy(t, policy(t, []string{"allowed.test", "127.0.0.1"}, nil), newDNS("allowed.test", "127.0.0.1"), egress.Options{MaxConns: 4})
	p := port(t, up.Listener.Addr().String())
	var wg sync.WaitGroup
	errc := make(chan string, 64)
	for i := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 3 {
			case 0:
				status, rest := h.raw(t, "GET http://allowed.test:"+p+"/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
				if !strings.Contains(status, "200") || !strings.HasSuffix(rest, "ok") {
					errc <- "allowed: " + status
				}
			case 1:
				status, _ := h.raw(t, "GET http://other.test:"+p+"/ HTTP/1.1\r\nHost: other.test\r\n\r\n")
				if !strings.Contains(status, "403") {
					errc <- "refused: " + status
				}
			case 2:
				c, err := net.Dial("tcp", h.addr)
				if err != nil {
					errc <- err.Error()
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.WriteString(c, "CONNECT "+echo+" HTTP/1.1\r\n\r\nping")
				c.(*net.TCPConn).CloseWrite()
				if all, _ := io.ReadAll(c); !strings.HasSuffix(string(all), "\r\n\r\nping") {
					errc <- "tunnel: " + string(all)
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for e := range errc {
		t.Error(e)
	}
}

// Closing one listener ends the tunnels that came through it before
// Serve returns, and leaves another listener's tunnels alone: a finished
// command's connections do not outlive it.
func TestListenerCloseEndsItsTunnels(t *testing.T) {
	echo := echoServer(t)
	h := startProxy(t, policy(t, []string{"127.0.0.1"}, nil), newDNS(), egress.Options{})
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- h.p.Serve(l2) }()
	other := &harness{p: h.p, addr: l2.Addr().String()}

	kept, keptR := tunnel(t, h, echo)
	gone, _ := tunnel(t, other, echo)
	l2.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its listener closed with a tunnel open")
	}
	// Serve has returned, so the tunnel must be gone already.
	gone.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := gone.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("a tunnel outlived its listener's Serve: %v", err)
	}
	io.WriteString(kept, "still here\n")
	if line, _ := keptR.ReadString('\n'); line != "still here\n" {
		t.Errorf("the other listener's tunnel was cut: %q", line)
	}
}

// Once its last listener is closed, a proxy that was never closed holds
// no goroutine: not even kept-alive upstream connections. A runner that
// serves one listener per command and never calls Close leaks nothing.
func TestNoGoroutinesAfterLastServe(t *testing.T) {
	// The upstream stays up throughout: a kept-alive connection to it
	// would keep goroutines on both ends.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	base := goleak.IgnoreCurrent()
	p := egress.New(policy(t, []string{"allowed.test"}, nil), egress.Options{Resolver: newDNS("allowed.test", "127.0.0.1"), Logger: slog.New(slog.DiscardHandler)})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(l) }()
	h := &harness{p: p, addr: l.Addr().String()}
	status, _ := h.raw(t, "GET http://allowed.test:"+port(t, up.Listener.Addr().String())+"/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
	if !strings.Contains(status, "200") {
		t.Fatalf("GET: %q", status)
	}
	l.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, base)
	p.Close()
}
