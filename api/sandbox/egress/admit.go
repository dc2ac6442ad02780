package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// neverAdmitted are the ranges an operator's admitted network may not
// touch: the box would reach the host itself (loopback, the unspecified
// address, which connect(2) sends to the host), a neighbour on any of the
// host's links without a route (link-local, the cloud metadata service
// at 169.254.169.254), or a group (multicast).
var neverAdmitted = []struct {
	prefix netip.Prefix
	name   string
}{
	{p("127.0.0.0/8"), "loopback"},
	{p("::1/128"), "loopback"},
	{p("0.0.0.0/32"), "unspecified"},
	{p("::/128"), "unspecified"},
	{p("169.254.0.0/16"), "link-local"},
	{p("fe80::/10"), "link-local"},
	{p("224.0.0.0/4"), "multicast"},
	{p("ff00::/8"), "multicast"},
}

// ParseAdmit reads the networks an operator admits although they are not
// public (api.yaml sandbox.local.egress.admit, cocoonbox-sandboxd
// --egress-admit): each a CIDR as netip.ParsePrefix reads it, its host
// bits zero, IPv4 written as IPv4 (not ::ffff:a.b.c.d), touching none of
// loopback, the unspecified address, link-local or multicast. The error
// names the entry and the rule it breaks.
func ParseAdmit(entries []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(entries))
	for _, e := range entries {
		n, err := netip.ParsePrefix(strings.TrimSpace(e))
		if err != nil {
			return nil, fmt.Errorf("%q is not a network in CIDR form (e.g. 10.20.0.0/16 or 203.0.113.80/32): %v", e, err)
		}
		if err := checkAdmit(n); err != nil {
			return nil, fmt.Errorf("%q %w", e, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// checkAdmit says what rule of ParseAdmit n breaks, or nil.
func checkAdmit(n netip.Prefix) error {
	if n.Addr().Is4In6() {
		return fmt.Errorf("is an IPv4-mapped IPv6 network: write it as IPv4 (an address is judged unmapped)")
	}
	if n.Masked() != n {
		return fmt.Errorf("has host bits set: the network is %s", n.Masked())
	}
	for _, s := range neverAdmitted {
		if n.Overlaps(s.prefix) {
			return fmt.Errorf("overlaps %s %s, which the egress proxy never admits", s.name, s.prefix)
		}
	}
	return nil
}
