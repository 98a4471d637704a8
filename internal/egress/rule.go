package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is one entry of an allow or deny list, parsed. It matches either
// host names (an exact name, every subdomain of a name, or any name) or
// addresses (one IP or a CIDR block), optionally on one port only.
type Rule struct {
	// text is the entry as the operator wrote it, quoted back in messages.
	text string
	// name is the lower-case name of a name rule; for a wildcard rule it is
	// the part after "*.".
	name string
	// sub: the rule is "*.name" and matches strict subdomains of name.
	sub bool
	// any: the rule is "*" and matches every host.
	any bool
	// prefix is valid for address rules (an IP is a full-length prefix).
	prefix netip.Prefix
	// port is the one port the rule covers; 0 means every port.
	port uint16
}

// String returns the entry as written in the config.
func (r Rule) String() string { return r.text }

// IsAddress reports whether the rule names an IP or a CIDR block.
func (r Rule) IsAddress() bool { return r.prefix.IsValid() }

// matchName reports whether a name rule covers host (normalized) on port.
func (r Rule) matchName(host string, port uint16) bool {
	if r.prefix.IsValid() || (r.port != 0 && r.port != port) {
		return false
	}
	switch {
	case r.any:
		return true
	case r.sub:
		// The dot keeps "badexample.com" out of "*.example.com", and a
		// strict suffix keeps "example.com" itself out.
		return len(host) > len(r.name)+1 && strings.HasSuffix(host, r.name) && host[len(host)-len(r.name)-1] == '.'
	default:
		return host == r.name
	}
}

// matchAddr reports whether an address rule covers addr on port.
func (r Rule) matchAddr(addr netip.Addr, port uint16) bool {
	if !r.prefix.IsValid() || (r.port != 0 && r.port != port) {
		return false
	}
	return r.prefix.Contains(addr.Unmap())
}

// ParseRule parses one list entry: "example.com", "*.example.com", "*",
// "10.0.0.1", "10.0.0.0/8", "2001:db8::/32", each optionally followed by
// ":port" (IPv6 in brackets then: "[2001:db8::1]:443"). The error says what
// is wrong with the entry and how to write it; it does not name the config
// key, which the caller adds.
func ParseRule(entry string) (Rule, error) {
	s := strings.TrimSpace(entry)
	r := Rule{text: s}
	switch {
	case s == "":
		return r, fmt.Errorf("the entry is empty; write a domain such as example.com, *.example.com, an IP or a CIDR block")
	case strings.Contains(s, "://"):
		return r, fmt.Errorf("%q has a URL scheme; write the host only, such as %q", s, hostOfURL(s))
	case strings.ContainsAny(s, " \t\r\n"):
		return r, fmt.Errorf("%q contains white space; write one host per entry", s)
	}
	host, port, err := splitPort(s)
	if err != nil {
		return r, err
	}
	r.port = port
	if p, ok, err := parseAddrOrPrefix(host); ok {
		if err != nil {
			return r, fmt.Errorf("%q: %w", s, err)
		}
		r.prefix = p
		return r, nil
	}
	if strings.Contains(host, "/") {
		return r, fmt.Errorf("%q has a path or is not a valid CIDR block; write a host such as example.com or a block such as 10.0.0.0/8", s)
	}
	switch {
	case host == "*":
		r.any = true
		return r, nil
	case strings.HasPrefix(host, "*."):
		r.sub = true
		host = host[2:]
	}
	if strings.Contains(host, "*") {
		return r, fmt.Errorf("%q: a wildcard may stand only alone (*) or as the whole first label (*.example.com)", s)
	}
	name, err := normalizeName(host)
	if err != nil {
		return r, fmt.Errorf("%q: %w", s, err)
	}
	r.name = name
	return r, nil
}

// splitPort separates an optional ":port" from an entry. A bare IPv6
// address or block (more than one colon, no brackets) has no port.
func splitPort(s string) (string, uint16, error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("%q opens a bracket it does not close; write [2001:db8::1]:443", s)
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		if !strings.HasPrefix(rest, ":") {
			return "", 0, fmt.Errorf("%q: after the bracketed address only :port may follow", s)
		}
		port, err := parsePort(s, rest[1:])
		return host, port, err
	}
	if strings.Count(s, ":") != 1 {
		return s, 0, nil
	}
	host, p, _ := strings.Cut(s, ":")
	port, err := parsePort(s, p)
	return host, port, err
}

func parsePort(entry, p string) (uint16, error) {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q: the port %q is not a number from 1 to 65535", entry, p)
	}
	return uint16(n), nil
}

// parseAddrOrPrefix parses an IP or CIDR block. ok is false when host is
// not meant as one (it then is a name), true with err when it is meant as
// one but malformed.
func parseAddrOrPrefix(host string) (netip.Prefix, bool, error) {
	if strings.Contains(host, "/") {
		addr, _, _ := strings.Cut(host, "/")
		if _, err := netip.ParseAddr(addr); err != nil {
			return netip.Prefix{}, false, nil
		}
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return p, true, fmt.Errorf("not a valid CIDR block (%v)", err)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Masked() != p {
			return p, true, fmt.Errorf("the block has bits set past its length; write %s", p.Masked())
		}
		return p, true, nil
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}, false, nil
	}
	if addr.Zone() != "" {
		return netip.Prefix{}, true, fmt.Errorf("an address with a zone (%%%s) cannot be matched; drop the zone", addr.Zone())
	}
	addr = addr.Unmap()
	return netip.PrefixFrom(addr, addr.BitLen()), true, nil
}

// normalizeName lower-cases a host name, drops one trailing dot and checks
// that it is a DNS name dsh can match: ASCII labels of letters, digits,
// '-' and '_', 1 to 63 bytes each, 253 in all, the last one not numeric.
func normalizeName(host string) (string, error) {
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "" {
		return "", fmt.Errorf("the host name is empty")
	}
	if len(name) > 253 {
		return "", fmt.Errorf("the host name is longer than 253 bytes")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return "", fmt.Errorf("the host name has an empty label (two dots in a row, or a leading dot)")
		}
		if len(l) > 63 {
			return "", fmt.Errorf("the label %q is longer than 63 bytes", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c >= 0x80:
				return "", fmt.Errorf("the host name is not ASCII; write an internationalized name in its xn-- (punycode) form")
			default:
				return "", fmt.Errorf("the host name contains %q; only letters, digits, '-', '_' and dots are allowed", c)
			}
		}
	}
	// A numeric last label is not a DNS name but some resolvers read it as
	// an IPv4 address in an old short form (127.1, 2130706433).
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", fmt.Errorf("the host looks like an IP address but is not one in dotted form; write all four parts (such as 10.0.0.1)")
	}
	return name, nil
}

// hostOfURL guesses the host part of a URL-like entry for a hint.
func hostOfURL(s string) string {
	_, rest, _ := strings.Cut(s, "://")
	host, _, _ := strings.Cut(rest, "/")
	if host == "" {
		return "example.com"
	}
	return host
}
