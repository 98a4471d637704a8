package egress_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/egress"
)

func TestParsePolicyForms(t *testing.T) {
	for _, tc := range []struct {
		v    any
		mode egress.Mode
	}{
		{nil, egress.ModeOff},
		{false, egress.ModeOff},
		{true, egress.ModeOn},
		{"off", egress.ModeOff},
		{" On ", egress.ModeOn},
		{"true", egress.ModeOn},
		{map[string]any{"allow": []any{"example.com"}}, egress.ModeAllowList},
		{map[any]any{"allow": []string{"*"}, "deny": []any{"10.0.0.0/8"}}, egress.ModeAllowList},
		{map[string]any{"allow": "a.test, b.test"}, egress.ModeAllowList},
	} {
		p, err := egress.ParsePolicy("agents[0].sandbox.network", tc.v)
		if err != nil {
			t.Errorf("%#v: %v", tc.v, err)
			continue
		}
		if p.Mode != tc.mode || p.Key != "agents[0].sandbox.network" {
			t.Errorf("%#v: mode %s key %q, want %s", tc.v, p.Mode, p.Key, tc.mode)
		}
	}
	p, _ := egress.ParsePolicy("k", map[string]any{"allow": "a.test, b.test"})
	if len(p.Allow) != 2 || p.Allow[1].String() != "b.test" {
		t.Errorf("a comma-separated string gave %v", p.Allow)
	}
}

// Every bad value names the key path (with the entry's index) and says
// how to write it.
func TestParsePolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want []string
	}{
		{"maybe", []string{"sandbox.network:", `"maybe" is not a network setting`, "write off, on"}},
		{3, []string{"sandbox.network:", "a number is not a network setting"}},
		{map[string]any{"alow": []any{"x.test"}}, []string{"sandbox.network.alow: unknown key", "allow and deny"}},
		{map[string]any{"deny": []any{"x.test"}}, []string{"sandbox.network.allow is empty", `["*"]`}},
		{map[string]any{"allow": true}, []string{"sandbox.network.allow: a boolean is not a list"}},
		{map[string]any{"allow": []any{"a.test", 7}}, []string{"sandbox.network.allow[1]: a number is not a host"}},
		{map[string]any{"allow": []any{"a.test"}, "deny": []any{"ok.test", "https://evil.test/x"}}, []string{"sandbox.network.deny[1]:", "URL scheme", `"evil.test"`}},
	} {
		_, err := egress.ParsePolicy("sandbox.network", tc.v)
		if !errs.Has(err, egress.PolicyInvalid, "egress/bad-policy") {
			t.Errorf("%#v: got %v, want a PolicyInvalid error", tc.v, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%#v: %q does not say %q", tc.v, err, w)
			}
		}
	}
}

func TestParseRule(t *testing.T) {
	good := []string{"example.com", "Example.COM.", "*.example.com", "*", "*:443", "example.com:8080",
		"10.0.0.1", "10.0.0.0/8", "10.0.0.0/8:443", "::1", "2001:db8::/32", "[2001:db8::1]:443", "[2001:db8::/32]:80",
		"::ffff:10.0.0.0/104", "_dmarc.example.com", "xn--bcher-kva.de"}
	for _, s := range good {
		if _, err := egress.ParseRule(s); err != nil {
			t.Errorf("ParseRule(%q): %v", s, err)
		}
	}
	bad := map[string]string{
		"":                               "empty",
		"https://example.com":            "URL scheme",
		"example.com/path":               "path",
		"a.*.example.com":                "wildcard",
		"*example.com":                   "wildcard",
		"**.example.com":                 "wildcard",
		"example.com:0":                  "1 to 65535",
		"example.com:70000":              "1 to 65535",
		"example.com:http":               "1 to 65535",
		"10.0.0.1/8":                     "write 10.0.0.0/8",
		"10.0.0.0/33":                    "CIDR",
		"[::1":                           "bracket",
		"[::1]443":                       ":port",
		"bücher.de":                      "punycode",
		"127.1":                          "IP address",
		"2130706433":                     "IP address",
		"fe80::1%eth0":                   "zone",
		"exa mple.com":                   "white space",
		"a..b":                           "empty label",
		"a!b.com":                        "only letters",
		strings.Repeat("a", 64) + ".com": "63",
	}
	for s, want := range bad {
		_, err := egress.ParseRule(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRule(%q) = %v, want an error saying %q", s, err, want)
		}
	}
}

// decide runs one decision and returns its reason ("" when allowed).
func decide(t *testing.T, p egress.Policy, dns *fakeDNS, host string, port uint16) string {
	t.Helper()
	addrs, err := p.Decide(context.Background(), dns, host, port)
	if err != nil {
		if !errs.HasCode(err, egress.Refused) {
			t.Fatalf("%s:%d: not a refusal: %v", host, port, err)
		}
		return errs.ReasonOf(err)
	}
	if len(addrs) == 0 {
		t.Fatalf("%s:%d allowed with no address", host, port)
	}
	return ""
}

func TestDecideWildcards(t *testing.T) {
	dns := newDNS("example.com", "93.184.215.14", "a.example.com", "93.184.215.14", "a.b.example.com", "93.184.215.14",
		"badexample.com", "93.184.215.14", "example.com.evil.test", "93.184.215.14", "xexample.com", "93.184.215.14")
	p := policy(t, []string{"*.example.com"}, nil)
	for host, want := range map[string]string{
		"a.example.com":         "",
		"a.b.example.com":       "",
		"A.Example.COM.":        "",
		"example.com":           egress.ReasonNotAllowed,
		"badexample.com":        egress.ReasonNotAllowed,
		"xexample.com":          egress.ReasonNotAllowed,
		"example.com.evil.test": egress.ReasonNotAllowed,
		"93.184.215.14":         egress.ReasonNotAllowed,
	} {
		if got := decide(t, p, dns, host, 443); got != want {
			t.Errorf("*.example.com, %s: got %q, want %q", host, got, want)
		}
	}
	exact := policy(t, []string{"example.com"}, nil)
	if got := decide(t, exact, dns, "a.example.com", 443); got != egress.ReasonNotAllowed {
		t.Errorf("example.com let a.example.com through (%q)", got)
	}
}

func TestDecidePorts(t *testing.T) {
	dns := newDNS("example.com", "93.184.215.14")
	p := policy(t, []string{"example.com:443", "93.184.215.0/24:8443"}, []string{"*:25"})
	for _, tc := range []struct {
		host string
		port uint16
		want string
	}{
		{"example.com", 443, ""},
		{"example.com", 80, egress.ReasonNotAllowed},
		{"93.184.215.9", 8443, ""},
		{"93.184.215.9", 443, egress.ReasonNotAllowed},
		{"example.com", 25, egress.ReasonDeniedName},
	} {
		if got := decide(t, p, dns, tc.host, tc.port); got != tc.want {
			t.Errorf("%s:%d: got %q, want %q", tc.host, tc.port, got, tc.want)
		}
	}
	// A deny "*:25" holds for IP literals too, even under allow "*".
	open := policy(t, []string{"*"}, []string{"*:25"})
	for _, tc := range []struct {
		host string
		port uint16
		want string
	}{
		{"93.184.215.14", 25, egress.ReasonDeniedAddress},
		{"93.184.215.14", 587, ""},
		{"example.com", 25, egress.ReasonDeniedName},
	} {
		if got := decide(t, open, dns, tc.host, tc.port); got != tc.want {
			t.Errorf("allow *, deny *:25, %s:%d: got %q, want %q", tc.host, tc.port, got, tc.want)
		}
	}
}

func TestDecideDenyWins(t *testing.T) {
	dns := newDNS("api.example.com", "93.184.215.14", "mixed.example.com", "93.184.215.14", "mixed.example.com", "10.1.2.3")
	p := policy(t, []string{"*.example.com", "api.example.com", "10.0.0.0/8"}, []string{"api.example.com", "10.1.0.0/16"})
	if got := decide(t, p, dns, "api.example.com", 443); got != egress.ReasonDeniedName {
		t.Errorf("deny of a name also allowed: %q", got)
	}
	// One denied address among the name's addresses refuses the name.
	if got := decide(t, p, dns, "mixed.example.com", 443); got != egress.ReasonDeniedAddress {
		t.Errorf("a name with one denied address: %q", got)
	}
	if got := decide(t, p, dns, "10.1.9.9", 443); got != egress.ReasonDeniedAddress {
		t.Errorf("an IP in a denied block inside an allowed one: %q", got)
	}
	if got := decide(t, p, dns, "::ffff:10.1.9.9", 443); got != egress.ReasonDeniedAddress {
		t.Errorf("an IPv4-mapped IPv6 literal escaped the IPv4 deny: %q", got)
	}
	if got := decide(t, p, dns, "10.2.0.1", 443); got != "" {
		t.Errorf("an allowed block refused: %q", got)
	}
}

// "*" and on mean the internet: loopback, private, link-local and kin
// need an entry naming the host or covering the address.
func TestDecideLocalAddresses(t *testing.T) {
	dns := newDNS("public.test", "93.184.215.14", "sneaky.test", "127.0.0.1", "meta.test", "169.254.169.254",
		"nat.test", "64:ff9b::7f00:1", "lan.test", "192.168.1.5", "mine.test", "127.0.0.1")
	star := policy(t, []string{"*", "mine.test", "192.168.0.0/16"}, nil)
	on, _ := egress.ParsePolicy("", true)
	for _, p := range []egress.Policy{star, on} {
		for host, want := range map[string]string{
			"public.test":     "",
			"sneaky.test":     egress.ReasonLocalAddress,
			"meta.test":       egress.ReasonLocalAddress,
			"nat.test":        egress.ReasonLocalAddress,
			"127.0.0.1":       egress.ReasonLocalAddress,
			"::1":             egress.ReasonLocalAddress,
			"0.0.0.0":         egress.ReasonLocalAddress,
			"93.184.215.14":   "",
			"169.254.169.254": egress.ReasonLocalAddress,
		} {
			if got := decide(t, p, dns, host, 80); got != want {
				t.Errorf("mode %s, %s: got %q, want %q", p.Mode, host, got, want)
			}
		}
	}
	// Explicit entries open the way.
	for _, host := range []string{"mine.test", "lan.test", "192.168.7.7"} {
		if got := decide(t, star, dns, host, 80); got != "" {
			t.Errorf("explicitly allowed %s refused: %q", host, got)
		}
	}
}

// A name the policy refuses is never looked up: lookups of made-up names
// would carry data out through DNS.
func TestDecideDoesNotResolveRefusedNames(t *testing.T) {
	dns := newDNS("ok.test", "93.184.215.14")
	p := policy(t, []string{"ok.test"}, []string{"*.evil.test"})
	decide(t, p, dns, "secret-1234.attacker.test", 443)
	decide(t, p, dns, "x.evil.test", 443)
	off, _ := egress.ParsePolicy("", false)
	decide(t, off, dns, "ok.test", 443)
	if got := dns.lookups(); len(got) != 0 {
		t.Errorf("refused names were resolved: %v", got)
	}
	decide(t, p, dns, "ok.test", 443)
	if got := dns.lookups(); !slices.Equal(got, []string{"ok.test"}) {
		t.Errorf("lookups: %v", got)
	}
}

func TestDecideMessages(t *testing.T) {
	dns := newDNS("example.org", "93.184.215.14", "rebind.test", "10.0.0.7")
	p := policy(t, []string{"rebind.test"}, []string{"10.0.0.0/8"})
	p.Key = "agents[1].sandbox.network"
	_, err := p.Decide(context.Background(), dns, "example.org", 443)
	if want := "dsh egress policy: example.org:443 is not in agents[1].sandbox.network.allow"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
	_, err = p.Decide(context.Background(), dns, "rebind.test", 443)
	if want := `rebind.test:443 resolves to 10.0.0.7, which is denied by agents[1].sandbox.network.deny entry "10.0.0.0/8"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
	_, err = p.Decide(context.Background(), dns, "10.9.9.9", 443)
	if want := `dsh egress policy: 10.9.9.9:443 is denied by agents[1].sandbox.network.deny entry "10.0.0.0/8"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
	_, err = p.Decide(context.Background(), dns, "::1", 80)
	if want := `dsh egress policy: [::1]:80 is a loopback address, which only an entry in agents[1].sandbox.network.allow`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
	var off egress.Policy
	_, err = off.Decide(context.Background(), dns, "example.org", 443)
	if want := "network access is off for sandboxed commands (sandbox.network: off)"; !errs.Has(err, egress.Refused, egress.ReasonOff) || !strings.Contains(err.Error(), want) {
		t.Errorf("zero policy: %v", err)
	}
	for _, host := range []string{"a b", "x..y", "", "fe80::1%eth0", "127.1"} {
		_, err := p.Decide(context.Background(), dns, host, 443)
		if !errs.HasCode(err, egress.BadTarget) {
			t.Errorf("host %q: %v, want BadTarget", host, err)
		}
	}
}

func TestPolicyString(t *testing.T) {
	on, _ := egress.ParsePolicy("", "on")
	for p, want := range map[*egress.Policy]string{
		{}:  "off",
		&on: "on",
		ptr(policy(t, []string{"a.test", "*.b.test"}, nil)):             "allow-list (allow: a.test, *.b.test)",
		ptr(policy(t, []string{"*"}, []string{"10.0.0.0/8", "c.test"})): "allow-list (allow: *; deny: 10.0.0.0/8, c.test)",
	} {
		if got := p.String(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestADeniedNameIsNotReachedByItsAddress: a literal address has no name
// for a name rule to see, so while deny names hosts only an allow entry
// covering the address lets a literal through.
func TestADeniedNameIsNotReachedByItsAddress(t *testing.T) {
	dns := newDNS("evil.example", "93.184.215.14", "good.example", "93.184.215.20")
	open := policy(t, []string{"*"}, []string{"evil.example"})
	for _, tc := range []struct {
		host string
		want string
	}{
		{"evil.example", egress.ReasonDeniedName},
		{"93.184.215.14", egress.ReasonDeniedAddress},
		{"[::ffff:93.184.215.14]", egress.ReasonDeniedAddress},
		{"good.example", ""},
	} {
		host := strings.Trim(tc.host, "[]")
		if got := decide(t, open, dns, host, 443); got != tc.want {
			t.Errorf("allow *, deny evil.example, %s: got %q, want %q", tc.host, got, tc.want)
		}
	}
	// An address the operator allowed outright still passes.
	both := policy(t, []string{"*", "93.184.215.0/24"}, []string{"evil.example"})
	if got := decide(t, both, dns, "93.184.215.20", 443); got != "" {
		t.Errorf("an allowed block under a name deny: %q", got)
	}
	// With deny naming only addresses, literals under * pass as before.
	addrOnly := policy(t, []string{"*"}, []string{"10.0.0.0/8"})
	if got := decide(t, addrOnly, dns, "93.184.215.20", 443); got != "" {
		t.Errorf("a literal under * with an address-only deny: %q", got)
	}
}
