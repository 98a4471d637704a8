package egress_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/egress"
)

// Any entry either parses or is refused with a message; none panics, and
// one that parses reads back as written.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com", "*", "*:443", "[::1]:80", "10.0.0.0/8", "::ffff:1.2.3.4/128", "a..b", "[", "]:", "%", "1.2.3.4:65536"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := egress.ParseRule(s)
		if err == nil && r.String() != strings.TrimSpace(s) {
			t.Fatalf("ParseRule(%q) reads back as %q", s, r)
		}
	})
}

// Any host a client may send is decided without a panic: refused, judged
// malformed, or allowed with addresses that pass the policy.
func FuzzDecide(f *testing.F) {
	for _, s := range []string{"allowed.test", "x.allowed.test", "127.0.0.1", "::ffff:127.0.0.1", "fe80::1%lo", "ALLOWED.test.", "", "a b", "2130706433"} {
		f.Add(s, uint16(443))
	}
	dns := newDNS("allowed.test", "93.184.215.14", "x.allowed.test", "127.0.0.1")
	p, err := egress.NewPolicy("sandbox.network", []string{"*.allowed.test", "allowed.test", "93.184.215.0/24"}, []string{"127.0.0.0/8"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host string, port uint16) {
		addrs, err := p.Decide(context.Background(), dns, host, port)
		if err != nil {
			if errs.CodeOf(err) == "" {
				t.Fatalf("%q: an error without a code: %v", host, err)
			}
			return
		}
		for _, a := range addrs {
			if netip.MustParsePrefix("127.0.0.0/8").Contains(a) {
				t.Fatalf("%q:%d allowed a denied address %s", host, port, a)
			}
		}
	})
}
