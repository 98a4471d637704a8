package egress_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/egress"
)

// sinkServer reads chunk bytes from each connection, answers one byte,
// and repeats, so a writer knows its chunk has arrived.
func sinkServer(b *testing.B, chunk int) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
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
				for {
					if _, err := io.CopyN(io.Discard, c, int64(chunk)); err != nil {
						return
					}
					if _, err := c.Write([]byte{1}); err != nil {
						return
					}
				}
			}()
		}
	}()
	b.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String()
}

// send writes one chunk and waits for the sink's acknowledgement.
func send(b *testing.B, c net.Conn, buf []byte, chunk int) time.Duration {
	start := time.Now()
	for sent := 0; sent < chunk; sent += len(buf) {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkConnectThroughput moves 8 MiB per iteration over a direct
// connection and over a CONNECT tunnel to the same loopback sink, and
// reports both rates and their ratio (tunnel time / direct time).
func BenchmarkConnectThroughput(b *testing.B) {
	const chunk = 8 << 20
	sink := sinkServer(b, chunk)
	h := startProxy(b, policy(b, []string{"127.0.0.1"}, nil), newDNS(), egress.Options{})
	direct, err := net.Dial("tcp", sink)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	tun := openTunnel(b, h.addr, sink)
	defer tun.Close()
	buf := make([]byte, 32<<10)
	var dt, pt time.Duration
	b.SetBytes(chunk)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		dt += send(b, direct, buf, chunk)
		pt += send(b, tun, buf, chunk)
	}
	mb := float64(chunk) * float64(b.N) / (1 << 20)
	b.ReportMetric(mb/dt.Seconds(), "direct-MiB/s")
	b.ReportMetric(mb/pt.Seconds(), "tunnel-MiB/s")
	b.ReportMetric(float64(pt)/float64(dt), "ratio")
}

func openTunnel(b *testing.B, proxy, target string) net.Conn {
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		b.Fatal(err)
	}
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\n\r\n")
	want := "HTTP/1.1 200 Connection established\r\n\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		b.Fatalf("CONNECT: %q %v", got, err)
	}
	return c
}

// BenchmarkRequestOverhead times one small GET on a kept-alive
// connection, directly and through the proxy (policy check, lookup and
// forwarding included), and reports the ratio.
func BenchmarkRequestOverhead(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	h := startProxy(b, policy(b, []string{"allowed.test"}, nil), newDNS("allowed.test", "127.0.0.1"), egress.Options{})
	dc := &http.Client{Transport: &http.Transport{}}
	pc := h.client(b, nil)
	defer dc.CloseIdleConnections()
	p := port(b, up.Listener.Addr().String())
	do := func(c *http.Client, u string) time.Duration {
		start := time.Now()
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	do(dc, up.URL)
	do(pc, "http://allowed.test:"+p+"/")
	var dt, pt time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		dt += do(dc, up.URL)
		pt += do(pc, "http://allowed.test:"+p+"/")
	}
	b.ReportMetric(float64(dt.Microseconds())/float64(b.N), "direct-µs/req")
	b.ReportMetric(float64(pt.Microseconds())/float64(b.N), "proxy-µs/req")
	b.ReportMetric(float64(pt)/float64(dt), "ratio")
}

// BenchmarkTunnelSetup times opening a connection and one round trip,
// directly and as a new CONNECT tunnel, and reports the ratio.
func BenchmarkTunnelSetup(b *testing.B) {
	sink := sinkServer(b, 1)
	h := startProxy(b, policy(b, []string{"127.0.0.1"}, nil), newDNS(), egress.Options{})
	one := []byte{0}
	var dt, pt time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		c, err := net.Dial("tcp", sink)
		if err != nil {
			b.Fatal(err)
		}
		send(b, c, one, 1)
		c.Close()
		dt += time.Since(start)
		start = time.Now()
		c = openTunnel(b, h.addr, sink)
		send(b, c, one, 1)
		c.Close()
		pt += time.Since(start)
	}
	b.ReportMetric(float64(dt.Microseconds())/float64(b.N), "direct-µs/op")
	b.ReportMetric(float64(pt.Microseconds())/float64(b.N), "tunnel-µs/op")
	b.ReportMetric(float64(pt)/float64(dt), "ratio")
}
