package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/dsh-go/dsh/errs"
)

// decide parses host:port from a request and asks the policy; it returns
// the addresses that may be dialled.
func (p *Proxy) decide(ctx context.Context, hostport, defaultPort string) (string, []netip.Addr, uint16, error) {
	host, port, err := splitHostPort(hostport, defaultPort)
	if err != nil {
		return hostport, nil, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	addrs, err := p.policy.Decide(ctx, p.opts.Resolver, host, port)
	return host, addrs, port, err
}

// dial connects to the first of addrs that answers, all within the dial
// timeout. It dials addresses, never the name, so what was checked is
// what is reached.
func (p *Proxy) dial(ctx context.Context, host string, addrs []netip.Addr, port uint16) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	var d net.Dialer
	var errList []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, port).String())
		if err == nil {
			return c, nil
		}
		errList = append(errList, err)
		if ctx.Err() != nil {
			break
		}
	}
	reason := "egress/dial"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		reason = "egress/dial-timeout"
	}
	return nil, errs.Wrap(Unreachable, errors.Join(errList...), fmt.Sprintf("dsh egress proxy: could not connect to %s", net.JoinHostPort(host, strconv.Itoa(int(port))))).WithReason(reason)
}

// splitHostPort splits a request's authority. IPv6 literals come in
// brackets; a missing port takes defaultPort ("" means it is required).
func splitHostPort(hostport, defaultPort string) (string, uint16, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if defaultPort == "" || hostport == "" {
			return "", 0, errs.New(BadTarget, fmt.Sprintf("dsh egress proxy: %q is not host:port", clip(hostport))).WithReason("egress/bad-target")
		}
		host, ps = hostport, defaultPort
		if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
			host = host[1 : len(host)-1]
		}
	}
	n, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || n == 0 {
		return "", 0, errs.New(BadTarget, fmt.Sprintf("dsh egress proxy: %q has no valid port (1 to 65535)", clip(hostport))).WithReason("egress/bad-target")
	}
	if host == "" {
		return "", 0, errs.New(BadTarget, fmt.Sprintf("dsh egress proxy: %q has no host", clip(hostport))).WithReason("egress/bad-target")
	}
	return host, uint16(n), nil
}
