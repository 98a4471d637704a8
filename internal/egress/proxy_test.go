package egress_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/egress"
	"github.com/dsh-go/dsh/internal/syncbuf"
)

// upstream is a plain HTTP server on loopback that echoes the Host it saw.
func upstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s %s", r.Host, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// tlsUpstream is an HTTPS server on loopback whose certificate names
// allowed.test; the returned client config trusts it.
func tlsUpstream(t *testing.T) (*httptest.Server, *tls.Config) {
	cert, pool := selfSigned(t, "allowed.test")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secure hello %s", r.URL.Path)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &tls.Config{RootCAs: pool}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyForwardsAllowedHTTP(t *testing.T) {
	up := upstream(t)
	h := startProxy(t, policy(t, []string{"allowed.test"}, nil), newDNS("allowed.test", "127.0.0.1"), egress.Options{})
	c := h.client(t, nil)
	u := "http://allowed.test:" + port(t, up.Listener.Addr().String())
	for i := range 3 { // the second and third reuse kept-alive connections
		code, body := get(t, c, u+"/p"+fmt.Sprint(i))
		if code != 200 || body != fmt.Sprintf("hello from allowed.test:%s /p%d", port(t, up.Listener.Addr().String()), i) {
			t.Fatalf("got %d %q", code, body)
		}
	}
	if r := h.recorded(); len(r) != 0 {
		t.Errorf("allowed requests recorded as refusals: %+v", r)
	}
}

// The upstream gets the host that was checked, whatever Host header the
// client sent: no fronting another site behind an allowed address.
func TestProxyForwardPinsHost(t *testing.T) {
	up := upstream(t)
	h := startProxy(t, policy(t, []string{"allowed.test"}, nil), newDNS("allowed.test", "127.0.0.1"), egress.Options{})
	p := port(t, up.Listener.Addr().String())
	status, rest := h.raw(t, "GET http://allowed.test:"+p+"/x HTTP/1.1\r\nHost: denied.test\r\nConnection: close\r\n\r\n")
	if !strings.Contains(status, "200") || !strings.Contains(rest, "hello from allowed.test:"+p+" /x") {
		t.Fatalf("got %q %q", status, rest)
	}
}

func TestProxyTunnelsAllowedCONNECT(t *testing.T) {
	up, tlsConf := tlsUpstream(t)
	h := startProxy(t, policy(t, []string{"allowed.test"}, nil), newDNS("allowed.test", "127.0.0.1"), egress.Options{})
	tr := &http.Transport{Proxy: http.ProxyURL(h.url), TLSClientConfig: tlsConf}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	code, body := get(t, c, "https://allowed.test:"+port(t, up.Listener.Addr().String())+"/tls")
	if code != 200 || body != "secure hello /tls" {
		t.Fatalf("got %d %q", code, body)
	}
}

func TestProxyRefusesDeniedName(t *testing.T) {
	up := upstream(t)
	dns := newDNS("allowed.test", "127.0.0.1", "denied.test", "127.0.0.1")
	h := startProxy(t, policy(t, []string{"allowed.test"}, nil), dns, egress.Options{Agent: "main"})
	p := port(t, up.Listener.Addr().String())
	code, body := get(t, h.client(t, nil), "http://denied.test:"+p+"/")
	want := "dsh egress policy: denied.test:" + p + " is not in sandbox.network.allow"
	if code != 403 || !strings.Contains(body, want) {
		t.Fatalf("got %d %q, want 403 %q", code, body, want)
	}
	// A refused CONNECT carries the message in its status line, which is
	// what most clients print.
	status, rest := h.raw(t, "CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n")
	if !strings.HasPrefix(status, "HTTP/1.1 403 Forbidden (dsh egress policy: denied.test:443 is not in sandbox.network.allow)") {
		t.Errorf("status line %q", status)
	}
	if !strings.Contains(rest, "Proxy-Status: dsh; error=http_request_denied") || !strings.Contains(rest, "X-Dsh-Egress-Reason: egress/not-allowed") {
		t.Errorf("headers: %q", rest)
	}
	recs := h.recorded()
	if len(recs) != 2 || recs[0].Agent != "main" || recs[0].Reason != egress.ReasonNotAllowed || recs[1].Method != "CONNECT" || recs[1].Target != "denied.test:443" {
		t.Errorf("refusals: %+v", recs)
	}
	for _, name := range dns.lookups() {
		if name == "denied.test" {
			t.Errorf("the refused name was resolved")
		}
	}
}

// An allowed name that resolves to a denied address (DNS rebinding) is
// refused, for forwarding and for tunnels, and nothing is dialled.
func TestProxyRefusesDeniedAddressBehindAllowedName(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer up.Close()
	dns := newDNS("rebind.test", "93.184.215.14", "rebind.test", "127.0.0.1")
	h := startProxy(t, policy(t, []string{"rebind.test"}, []string{"127.0.0.0/8"}), dns, egress.Options{})
	p := port(t, up.Listener.Addr().String())
	code, body := get(t, h.client(t, nil), "http://rebind.test:"+p+"/")
	if code != 403 || !strings.Contains(body, "resolves to 127.0.0.1, which is denied by sandbox.network.deny entry \"127.0.0.0/8\"") {
		t.Fatalf("got %d %q", code, body)
	}
	status, _ := h.raw(t, "CONNECT rebind.test:"+p+" HTTP/1.1\r\n\r\n")
	if !strings.Contains(status, "403") {
		t.Fatalf("CONNECT: %q", status)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the denied address was reached %d times", n)
	}
	if r := h.recorded(); len(r) != 2 || r[0].Reason != egress.ReasonDeniedAddress || r[0].Rule != "127.0.0.0/8" {
		t.Errorf("refusals: %+v", r)
	}
}

func TestProxyDenyWins(t *testing.T) {
	up := upstream(t)
	h := startProxy(t, policy(t, []string{"*.allowed.test", "127.0.0.1"}, []string{"x.allowed.test"}),
		newDNS("x.allowed.test", "127.0.0.1", "y.allowed.test", "127.0.0.1"), egress.Options{})
	p := port(t, up.Listener.Addr().String())
	c := h.client(t, nil)
	if code, body := get(t, c, "http://x.allowed.test:"+p+"/"); code != 403 || !strings.Contains(body, `denied by sandbox.network.deny entry "x.allowed.test"`) {
		t.Errorf("denied name: %d %q", code, body)
	}
	if code, _ := get(t, c, "http://y.allowed.test:"+p+"/"); code != 200 {
		t.Errorf("allowed sibling: %d", code)
	}
	if code, _ := get(t, c, "http://127.0.0.1:"+p+"/"); code != 200 {
		t.Errorf("allowed IP literal: %d", code)
	}
}

func TestProxyPortRules(t *testing.T) {
	up := upstream(t)
	other := upstream(t)
	p := port(t, up.Listener.Addr().String())
	h := startProxy(t, policy(t, []string{"allowed.test:" + p}, nil), newDNS("allowed.test", "127.0.0.1"), egress.Options{})
	c := h.client(t, nil)
	if code, _ := get(t, c, "http://allowed.test:"+p+"/"); code != 200 {
		t.Errorf("the allowed port: %d", code)
	}
	op := port(t, other.Listener.Addr().String())
	if code, body := get(t, c, "http://allowed.test:"+op+"/"); code != 403 || !strings.Contains(body, "allowed.test:"+op+" is not in") {
		t.Errorf("another port: %d %q", code, body)
	}
	status, _ := h.raw(t, "CONNECT allowed.test:"+op+" HTTP/1.1\r\n\r\n")
	if !strings.Contains(status, "403") {
		t.Errorf("CONNECT to another port: %q", status)
	}
}

// Garbage and malformed requests get 400 (or 431 for a huge header) and
// the proxy keeps serving.
func TestProxyMalformedRequests(t *testing.T) {
	up := upstream(t)
	h := startProxy(t, policy(t, []string{"allowed.test"}, nil), newDNS("allowed.test", "127.0.0.1"), egress.Options{MaxHeaderBytes: 1024})
	for name, tc := range map[string]struct{ req, status, body string }{
		"garbage":        {"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03garbage\r\n\r\n", "400", ""},
		"no version":     {"GET http://allowed.test/\r\n\r\n", "400", ""},
		"origin form":    {"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "400", "this is an HTTP proxy"},
		"connect noport": {"CONNECT allowed.test HTTP/1.1\r\n\r\n", "400", "is not host:port"},
		"connect port 0": {"CONNECT allowed.test:0 HTTP/1.1\r\n\r\n", "400", "no valid port"},
		"connect bad":    {"CONNECT a%20b:443 HTTP/1.1\r\n\r\n", "400", ""},
		"connect short":  {"CONNECT 127.1:443 HTTP/1.1\r\n\r\n", "400", "not a host name"},
		"connect zone":   {"CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n", "400", ""},
		"https absolute": {"GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "400", "CONNECT"},
		"ftp absolute":   {"GET ftp://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "400", "CONNECT"},
		"huge header":    {"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", "431", ""},
		"nul in host":    {"CONNECT a\x00b:443 HTTP/1.1\r\n\r\n", "400", ""},
	} {
		status, rest := h.raw(t, tc.req)
		if !strings.Contains(status, tc.status) || !strings.Contains(rest, tc.body) {
			t.Errorf("%s: got %q %q, want %s %q", name, status, rest, tc.status, tc.body)
		}
	}
	if code, _ := get(t, h.client(t, nil), "http://allowed.test:"+port(t, up.Listener.Addr().String())+"/"); code != 200 {
		t.Errorf("the proxy stopped serving after bad requests: %d", code)
	}
}

// A client that never finishes its header is cut off after HeaderTimeout.
func TestProxyHeaderTimeout(t *testing.T) {
	h := startProxy(t, policy(t, []string{"allowed.test"}, nil), newDNS(), egress.Options{HeaderTimeout: 200 * time.Millisecond})
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET http://allowed.test/ HTTP/1.1\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	io.ReadAll(c)
	if time.Since(start) > 4*time.Second {
		t.Errorf("a stalled header kept the connection for %s", time.Since(start))
	}
}

// An allowed host that cannot be reached is a 502 saying so.
func TestProxyUnreachable(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	p := port(t, l.Addr().String())
	l.Close() // nothing listens there now
	h := startProxy(t, policy(t, []string{"allowed.test", "nxdomain.test"}, nil), newDNS("allowed.test", "127.0.0.1"), egress.Options{})
	code, body := get(t, h.client(t, nil), "http://allowed.test:"+p+"/")
	if code != 502 || !strings.Contains(body, "could not connect to allowed.test:"+p) {
		t.Errorf("closed port: %d %q", code, body)
	}
	status, rest := h.raw(t, "CONNECT nxdomain.test:443 HTTP/1.1\r\n\r\n")
	if !strings.Contains(status, "502") || !strings.Contains(rest, "could not resolve nxdomain.test") || !strings.Contains(rest, "error=dns_error") {
		t.Errorf("unknown name: %q %q", status, rest)
	}
	if len(h.recorded()) != 0 {
		t.Errorf("failures recorded as refusals")
	}
}

// A request sent to the proxy's own address does not loop: it reaches
// the proxy in origin form, which the proxy refuses.
func TestProxyLoop(t *testing.T) {
	h := startProxy(t, policy(t, []string{"127.0.0.1"}, nil), newDNS(), egress.Options{MaxConns: 4})
	code, body := get(t, h.client(t, nil), "http://"+h.addr+"/")
	if code != http.StatusBadRequest || !strings.Contains(body, "this is an HTTP proxy") {
		t.Fatalf("got %d %q", code, body)
	}
}

// An Upgrade (WebSocket style) through a forwarded request works, and
// Close ends it like a tunnel.
func TestProxyUpgradeAndClose(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want upgrade", 400)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		io.Copy(c, brw)
	}))
	defer up.Close()
	h := startProxy(t, policy(t, []string{"allowed.test"}, nil), newDNS("allowed.test", "127.0.0.1"), egress.Options{})
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	p := port(t, up.Listener.Addr().String())
	io.WriteString(c, "GET http://allowed.test:"+p+"/ws HTTP/1.1\r\nHost: allowed.test:"+p+"\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(c, "ping\n")
	if line, _ := br.ReadString('\n'); line != "ping\n" {
		t.Fatalf("echo over the upgraded connection: %q", line)
	}
	h.p.Close()
	if _, err := br.ReadByte(); err == nil || isTimeout(err) {
		t.Errorf("the upgraded connection outlived Close: %v", err)
	}
}

// Each refusal is one log line naming the agent, the target, the reason
// and the deciding rule.
func TestRefusalIsLogged(t *testing.T) {
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	h := startProxy(t, policy(t, []string{"*"}, []string{"*.denied.test"}), newDNS(), egress.Options{Agent: "reviewer", Logger: logger})
	h.raw(t, "CONNECT x.denied.test:443 HTTP/1.1\r\n\r\n")
	line := logs.String()
	for _, want := range []string{`"level":"WARN"`, `"agent":"reviewer"`, `"target":"x.denied.test:443"`, `"reason":"egress/denied-name"`, `"rule":"*.denied.test"`, "dsh egress policy: x.denied.test:443 is denied"} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q lacks %s", line, want)
		}
	}
	if n := strings.Count(line, "\n"); n != 1 {
		t.Errorf("%d log lines for one refusal", n)
	}
}

// A refused request whose body the proxy never reads still gets its 403,
// not a connection reset.
func TestRefusalWithUnreadBody(t *testing.T) {
	h := startProxy(t, policy(t, []string{"allowed.test"}, nil), newDNS(), egress.Options{})
	c := h.client(t, nil)
	for range 5 {
		body := strings.NewReader(strings.Repeat("x", 4<<20))
		resp, err := c.Post("http://denied.test/upload", "application/octet-stream", body)
		if err != nil {
			t.Fatalf("POST with a large body to a refused host: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(b), "denied.test:80 is not in sandbox.network.allow") {
			t.Fatalf("got %d %q", resp.StatusCode, b)
		}
	}
	// Raw, with the body already on the wire behind the header.
	status, _ := h.raw(t, "POST http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\nContent-Length: 200000\r\n\r\n"+strings.Repeat("y", 200000))
	if !strings.Contains(status, "403") {
		t.Fatalf("raw POST: %q", status)
	}
}
