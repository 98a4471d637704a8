package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// Codes of the errors this package returns.
const (
	// PolicyInvalid: a config value is not a network policy; the message
	// names the key path and says how to write it.
	PolicyInvalid errs.Code = "EGRESS_POLICY_INVALID"
	// Refused: the policy does not let the connection through. The reason
	// says which rule decided (egress/off, egress/not-allowed, ...).
	Refused errs.Code = "EGRESS_REFUSED"
	// BadTarget: the client asked for something that is not a host the
	// proxy can judge (malformed name, zone, missing port).
	BadTarget errs.Code = "EGRESS_BAD_TARGET"
	// Unreachable: the host was allowed but could not be resolved or
	// connected to.
	Unreachable errs.Code = "EGRESS_UNREACHABLE"
)

// Reasons of Refused errors.
const (
	ReasonOff           = "egress/off"
	ReasonNotAllowed    = "egress/not-allowed"
	ReasonDeniedName    = "egress/denied-name"
	ReasonDeniedAddress = "egress/denied-address"
	ReasonLocalAddress  = "egress/local-address"
)

// DefaultKey is the config key named in messages when a Policy has none.
const DefaultKey = "sandbox.network"

// Mode is how much network a policy lets through.
type Mode int

const (
	// ModeOff refuses every connection. It is the zero value, so a
	// Policy nobody filled in lets nothing out.
	ModeOff Mode = iota
	// ModeOn lets every host through, as an allow list of "*" would:
	// local addresses (loopback, private, link-local) still need an
	// explicit allow entry.
	ModeOn
	// ModeAllowList lets through what Allow covers and Deny does not.
	ModeAllowList
)

// String returns off, on or allow-list.
func (m Mode) String() string {
	switch m {
	case ModeOff:
		return "off"
	case ModeOn:
		return "on"
	case ModeAllowList:
		return "allow-list"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Policy says which hosts a sandboxed command may reach. Deny wins over
// allow. Build one with ParsePolicy (from config) or NewPolicy.
type Policy struct {
	// Mode is off, on or allow-list; Allow and Deny apply to allow-list.
	Mode  Mode
	Allow []Rule
	Deny  []Rule
	// Key is the config key the policy came from ("sandbox.network" or
	// "agents[0].sandbox.network"); refusals name it so a person knows
	// what to change.
	Key string
}

// NewPolicy builds an allow-list policy from entries, validated as
// ParsePolicy does; key names the config key in errors and refusals.
func NewPolicy(key string, allow, deny []string) (Policy, error) {
	return ParsePolicy(key, map[string]any{"allow": allow, "deny": deny})
}

// Resolver looks host names up. *net.Resolver satisfies it; tests map fake
// names to loopback addresses with their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

func (p Policy) key() string {
	if p.Key == "" {
		return DefaultKey
	}
	return p.Key
}

// Decide checks one target: host as the client asked for it (a name or an
// IP literal, unbracketed) and port. A name is checked first and resolved
// with res (nil: net.DefaultResolver) only when the name may pass, then every address it resolves to
// is checked; Decide returns the addresses the caller may dial, all of
// them allowed. The error is a Refused, BadTarget or Unreachable *errs.Error
// whose message is meant for the person or model behind the client.
func (p Policy) Decide(ctx context.Context, res Resolver, host string, port uint16) ([]netip.Addr, error) {
	t, err := parseTarget(host, port)
	if err != nil {
		return nil, err
	}
	if p.Mode == ModeOff {
		return nil, p.refuse(ReasonOff, t, "", fmt.Sprintf("dsh egress policy: network access is off for sandboxed commands (%s: off); %s was not contacted", p.key(), t))
	}
	if t.addr.IsValid() {
		if err := p.checkAddr(t, t.addr, false); err != nil {
			return nil, err
		}
		return []netip.Addr{t.addr}, nil
	}
	explicit, err := p.checkName(t)
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = net.DefaultResolver
	}
	addrs, err := res.LookupNetIP(ctx, "ip", t.name)
	if err != nil {
		return nil, errs.Wrap(Unreachable, err, fmt.Sprintf("dsh egress proxy: could not resolve %s", t.name)).WithReason("egress/resolve")
	}
	if len(addrs) == 0 {
		return nil, errs.New(Unreachable, fmt.Sprintf("dsh egress proxy: %s has no address", t.name)).WithReason("egress/resolve")
	}
	out := make([]netip.Addr, 0, len(addrs))
	// Every address must pass, not just the one dialled first: a name
	// that resolves to one public and one denied address is refused.
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if err := p.checkAddr(t, a, explicit); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// checkName applies the name rules. explicit reports that an allow rule
// other than "*" named the host, which lets it resolve to local addresses.
func (p Policy) checkName(t target) (explicit bool, err error) {
	for _, r := range p.Deny {
		if r.matchName(t.name, t.port) {
			return false, p.refuse(ReasonDeniedName, t, r.text, fmt.Sprintf("dsh egress policy: %s is denied by %s.deny entry %q", t, p.key(), r.text))
		}
	}
	if p.Mode == ModeOn {
		return false, nil
	}
	allowed := false
	for _, r := range p.Allow {
		if r.matchName(t.name, t.port) {
			allowed = true
			if !r.any {
				return true, nil
			}
		}
	}
	if !allowed {
		return false, p.refuse(ReasonNotAllowed, t, "", fmt.Sprintf("dsh egress policy: %s is not in %s.allow", t, p.key()))
	}
	return false, nil
}

// checkAddr applies the address rules to one address, either the literal
// the client asked for or one the name resolved to.
func (p Policy) checkAddr(t target, a netip.Addr, explicit bool) error {
	for _, r := range p.Deny {
		// A deny "*" (or "*:port") covers addresses as well as names.
		if r.matchAddr(a, t.port) || (r.any && r.matchName("", t.port)) {
			return p.refuse(ReasonDeniedAddress, t, r.text, p.addrMsg(t, a, fmt.Sprintf("denied by %s.deny entry %q", p.key(), r.text)))
		}
	}
	for _, r := range p.Allow {
		if r.matchAddr(a, t.port) {
			return nil
		}
	}
	wildcard := p.Mode == ModeOn
	for _, r := range p.Allow {
		if r.any && r.matchName("", t.port) {
			wildcard = true
		}
	}
	local := localKind(a)
	switch {
	case local != "" && !explicit:
		return p.refuse(ReasonLocalAddress, t, "", p.addrMsg(t, a, fmt.Sprintf("a %s address, which only an entry in %s.allow naming this host or covering this address lets through", local, p.key())))
	case explicit:
		return nil
	case t.addr.IsValid() && !wildcard:
		return p.refuse(ReasonNotAllowed, t, "", fmt.Sprintf("dsh egress policy: %s is not in %s.allow", t, p.key()))
	case t.addr.IsValid():
		// A literal address carries no name for a name rule to see: with
		// deny listing evil.example, its address would be the way round.
		// While deny names hosts, only an allow entry covering the address
		// lets a literal through.
		if rule, ok := p.denyNamesHosts(); ok {
			return p.refuse(ReasonDeniedAddress, t, rule, fmt.Sprintf("dsh egress policy: %s is an IP address, refused because %s.deny names hosts (%q) that an address would get round; add the address or its block to %s.allow to reach it", t, p.key(), rule, p.key()))
		}
	}
	return nil
}

// denyNamesHosts returns the first deny entry that names hosts rather
// than addresses (other than "*", which covers addresses already).
func (p Policy) denyNamesHosts() (string, bool) {
	for _, r := range p.Deny {
		if !r.IsAddress() && !r.any {
			return r.text, true
		}
	}
	return "", false
}

// addrMsg words an address refusal; why is "denied by ..." or "a
// loopback address, ...".
func (p Policy) addrMsg(t target, a netip.Addr, why string) string {
	if t.addr.IsValid() {
		return fmt.Sprintf("dsh egress policy: %s is %s", t, why)
	}
	if strings.HasPrefix(why, "denied") {
		why = "which is " + why
	}
	return fmt.Sprintf("dsh egress policy: %s resolves to %s, %s", t, a, why)
}

func (p Policy) refuse(reason string, t target, rule, msg string) *errs.Error {
	e := errs.New(Refused, msg).WithReason(reason)
	e.Details = map[string]any{"target": t.String(), "key": p.key()}
	if rule != "" {
		e.Details["rule"] = rule
	}
	return e
}

// target is a normalized host and port from a request.
type target struct {
	name string     // lower-case host name; "" for an IP literal
	addr netip.Addr // the IP literal; invalid for a name
	port uint16
}

func (t target) String() string {
	if t.addr.IsValid() {
		return netip.AddrPortFrom(t.addr, t.port).String()
	}
	return t.name + ":" + strconv.Itoa(int(t.port))
}

func parseTarget(host string, port uint16) (target, error) {
	if port == 0 {
		return target{}, errs.New(BadTarget, fmt.Sprintf("dsh egress proxy: %q has no port; ask for host:port", clip(host))).WithReason("egress/bad-target")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return target{}, errs.New(BadTarget, fmt.Sprintf("dsh egress proxy: %q has an IPv6 zone, which the proxy does not dial", clip(host))).WithReason("egress/bad-target")
		}
		return target{addr: a.Unmap(), port: port}, nil
	}
	name, err := normalizeName(host)
	if err != nil {
		return target{}, errs.New(BadTarget, fmt.Sprintf("dsh egress proxy: %q is not a host name the proxy accepts: %v", clip(host), err)).WithReason("egress/bad-target")
	}
	return target{name: name, port: port}, nil
}

// clip shortens what a client sent before it is echoed in a message.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

// String describes the policy in one line for status and log lines:
// "off", "on", or "allow-list (allow: a, *.b; deny: c)".
func (p Policy) String() string {
	if p.Mode != ModeAllowList {
		return p.Mode.String()
	}
	var b strings.Builder
	b.WriteString("allow-list (allow: ")
	for i, r := range p.Allow {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.text)
	}
	if len(p.Deny) > 0 {
		b.WriteString("; deny: ")
		for i, r := range p.Deny {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(r.text)
		}
	}
	b.WriteString(")")
	return b.String()
}
