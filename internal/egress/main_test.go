package egress_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/egress"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeDNS maps made-up names to addresses and records what was asked.
type fakeDNS struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
	asked []string
}

func newDNS(pairs ...string) *fakeDNS {
	d := &fakeDNS{names: map[string][]netip.Addr{}}
	for i := 0; i+1 < len(pairs); i += 2 {
		d.names[pairs[i]] = append(d.names[pairs[i]], netip.MustParseAddr(pairs[i+1]))
	}
	return d
}

func (d *fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, host)
	if a, ok := d.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (d *fakeDNS) lookups() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.asked...)
}

// policy builds an allow-list policy or fails the test.
func policy(t testing.TB, allow, deny []string) egress.Policy {
	t.Helper()
	p, err := egress.NewPolicy("sandbox.network", allow, deny)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

// harness is a running proxy on loopback with its refusals recorded.
type harness struct {
	p        *egress.Proxy
	addr     string
	url      *url.URL
	mu       sync.Mutex
	refusals []egress.Refusal
	served   chan error
}

func startProxy(t testing.TB, pol egress.Policy, dns egress.Resolver, opts egress.Options) *harness {
	t.Helper()
	h := &harness{served: make(chan error, 1)}
	opts.Resolver = dns
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.OnRefusal = func(r egress.Refusal) {
		h.mu.Lock()
		h.refusals = append(h.refusals, r)
		h.mu.Unlock()
	}
	h.p = egress.New(pol, opts)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = l.Addr().String()
	h.url = &url.URL{Scheme: "http", Host: h.addr}
	go func() { h.served <- h.p.Serve(l) }()
	t.Cleanup(func() {
		if err := h.p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-h.served:
			if err != nil {
				t.Errorf("Serve returned %v after Close", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
	})
	return h
}

func (h *harness) recorded() []egress.Refusal {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]egress.Refusal(nil), h.refusals...)
}

// client returns an HTTP client that goes through the proxy and trusts
// roots (nil: the system's).
func (h *harness) client(t testing.TB, roots *x509.CertPool) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyURL(h.url), TLSClientConfig: &tls.Config{RootCAs: roots}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// raw sends req on a fresh connection to the proxy and returns the
// status line, the response headers and body as text. It reports
// failures with Errorf, so it may run on any goroutine.
func (h *harness) raw(t testing.TB, req string) (status string, rest string) {
	t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Errorf("dial the proxy: %v", err)
		return "", ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Errorf("send %q: %v", clipTest(req), err)
		return "", ""
	}
	br := bufio.NewReader(c)
	status, _ = br.ReadString('\n')
	b, _ := io.ReadAll(br)
	return strings.TrimSpace(status), string(b)
}

// port returns the port of a loopback server's address.
func port(t testing.TB, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// selfSigned makes a TLS certificate for names and a pool trusting it.
func selfSigned(t testing.TB, names ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: names[0]},
		DNSNames:              names,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

func clipTest(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
