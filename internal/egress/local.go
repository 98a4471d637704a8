package egress

import "net/netip"

// extraLocal are IPv4 blocks that are not the internet but that netip's
// predicates do not name: "this network", carrier-grade NAT, IETF protocol
// assignments, benchmarking, and the reserved block with broadcast.
var extraLocal = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// nat64 is the well-known NAT64 prefix; an address in it stands for the
// IPv4 address in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// localKind names the kind of a non-internet address (loopback, private,
// link-local, ...), or returns "" for an address on the internet. The
// proxy runs in dsh's own network namespace, so without this check a
// policy of "*" would hand a sandboxed command dsh's loopback services
// (dsh serve among them), the cloud metadata endpoint and the LAN.
func localKind(a netip.Addr) string {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		if k := localKind(netip.AddrFrom4([4]byte(b[12:]))); k != "" {
			return k
		}
	}
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast():
		return "multicast"
	case a.IsPrivate():
		return "private"
	}
	for _, p := range extraLocal {
		if p.Contains(a) {
			return "reserved"
		}
	}
	return ""
}
