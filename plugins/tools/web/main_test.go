package web

import (
	stdctx "context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// dns is the resolver every test fetcher uses: made-up names under .test
// mapped to addresses, and a record of what was looked up.
var dns = &fakeDNS{names: map[string][]netip.Addr{
	"site.test":    {netip.MustParseAddr("127.0.0.1")},
	"other.test":   {netip.MustParseAddr("127.0.0.1")},
	"denied.test":  {netip.MustParseAddr("127.0.0.1")},
	"rebind.test":  {netip.MustParseAddr("127.0.0.1")},
	"example.com":  {netip.MustParseAddr("127.0.0.1")},
	"private.test": {netip.MustParseAddr("10.1.2.3")},
	"mixed.test":   {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.168.7.7")},
}}

// dials records every address a test fetcher connected to. Anything but
// loopback is refused here before a packet leaves: a test must never reach
// a private or public address, whatever the code under test gets wrong.
var dials = &dialLog{}

func TestMain(m *testing.M) {
	resolver = dns
	real := dialAddr
	dialAddr = func(ctx stdctx.Context, d *net.Dialer, a netip.AddrPort) (net.Conn, error) {
		dials.add(a)
		if !a.Addr().IsLoopback() {
			return nil, fmt.Errorf("test guard: refusing to dial %s, not a loopback address", a)
		}
		return real(ctx, d, a)
	}
	goleak.VerifyTestMain(m)
}

type fakeDNS struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
	asked []string
}

func (d *fakeDNS) LookupNetIP(_ stdctx.Context, _, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, host)
	if a, ok := d.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (d *fakeDNS) lookedUp(host string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range d.asked {
		if h == host {
			return true
		}
	}
	return false
}

type dialLog struct {
	mu   sync.Mutex
	list []netip.AddrPort
}

func (l *dialLog) add(a netip.AddrPort) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, a)
}

// nonLoopback returns the dials to anything but loopback so far.
func (l *dialLog) nonLoopback() []netip.AddrPort {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []netip.AddrPort
	for _, a := range l.list {
		if !a.Addr().IsLoopback() {
			out = append(out, a)
		}
	}
	return out
}

// newTestFetcher is a fetcher with cfg's settings over the defaults; it is
// closed when the test ends.
func newTestFetcher(t *testing.T, cfg Config) *fetcher {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg = cfg.withDefaults()
	p, err := cfg.policy()
	if err != nil {
		t.Fatal(err)
	}
	f := newFetcher(cfg, p)
	t.Cleanup(f.close)
	return f
}

// serve starts a local HTTP server; it is closed when the test ends.
func serve(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// at is the server's URL with host put in the place of 127.0.0.1, so the
// fake resolver decides where the name leads.
func at(t *testing.T, s *httptest.Server, host, path string) string {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = net.JoinHostPort(host, u.Port())
	return u.String() + path
}
