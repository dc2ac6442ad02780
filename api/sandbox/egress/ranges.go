package egress

import (
	"fmt"
	"net/netip"
)

// special is IANA's special-purpose address registries (IPv4 and IPv6,
// as of 2024: RFC 6890 and its updates) with each entry's "globally
// reachable" column, plus the ranges of the address architectures that
// those registries leave out (IPv4 multicast, IPv6 site-local and
// multicast). The most specific entry holding an address decides, so an
// anycast service inside a reserved block (192.0.0.9/32 inside
// 192.0.0.0/24) is judged by its own row. "N/A" in the registry (Teredo,
// 6to4: the real destination is inside the address) counts as not
// reachable.
var special = []struct {
	prefix netip.Prefix
	name   string
	global bool
}{
	{p("0.0.0.0/8"), `"this network" (RFC 791)`, false},
	{p("10.0.0.0/8"), "private-use (RFC 1918)", false},
	{p("100.64.0.0/10"), "shared address space, carrier-grade NAT (RFC 6598)", false},
	{p("127.0.0.0/8"), "loopback (RFC 1122)", false},
	{p("169.254.0.0/16"), "link-local (RFC 3927)", false},
	{p("172.16.0.0/12"), "private-use (RFC 1918)", false},
	{p("192.0.0.0/24"), "IETF protocol assignments (RFC 6890)", false},
	{p("192.0.0.9/32"), "PCP anycast (RFC 7723)", true},
	{p("192.0.0.10/32"), "TURN anycast (RFC 8155)", true},
	{p("192.0.2.0/24"), "documentation, TEST-NET-1 (RFC 5737)", false},
	{p("192.31.196.0/24"), "AS112-v4 (RFC 7535)", true},
	{p("192.52.193.0/24"), "AMT (RFC 7450)", true},
	{p("192.88.99.0/24"), "deprecated 6to4 relay anycast (RFC 7526)", false},
	{p("192.168.0.0/16"), "private-use (RFC 1918)", false},
	{p("192.175.48.0/24"), "direct delegation AS112 (RFC 7534)", true},
	{p("198.18.0.0/15"), "benchmarking (RFC 2544)", false},
	{p("198.51.100.0/24"), "documentation, TEST-NET-2 (RFC 5737)", false},
	{p("203.0.113.0/24"), "documentation, TEST-NET-3 (RFC 5737)", false},
	{p("224.0.0.0/4"), "multicast (RFC 5771)", false},
	{p("240.0.0.0/4"), "reserved (RFC 1112)", false},
	{p("255.255.255.255/32"), "limited broadcast (RFC 919)", false},

	{p("::/128"), "unspecified (RFC 4291)", false},
	{p("::1/128"), "loopback (RFC 4291)", false},
	{p("64:ff9b:1::/48"), "local-use IPv4/IPv6 translation (RFC 8215)", false},
	{p("100::/64"), "discard-only (RFC 6666)", false},
	{p("100:0:0:1::/64"), "dummy IPv6 prefix (RFC 9780)", false},
	{p("2001::/23"), "IETF protocol assignments (RFC 2928)", false},
	{p("2001::/32"), "Teredo (RFC 4380)", false},
	{p("2001:1::1/128"), "PCP anycast (RFC 7723)", true},
	{p("2001:1::2/128"), "TURN anycast (RFC 8155)", true},
	{p("2001:1::3/128"), "DNS-SD SRP anycast (RFC 9665)", true},
	{p("2001:2::/48"), "benchmarking (RFC 5180)", false},
	{p("2001:3::/32"), "AMT (RFC 7450)", true},
	{p("2001:4:112::/48"), "AS112-v6 (RFC 7535)", true},
	{p("2001:10::/28"), "deprecated ORCHID (RFC 4843)", false},
	{p("2001:20::/28"), "ORCHIDv2 (RFC 7343)", true},
	{p("2001:30::/28"), "drone remote ID (RFC 9374)", true},
	{p("2001:db8::/32"), "documentation (RFC 3849)", false},
	{p("2002::/16"), "6to4 (RFC 3056)", false},
	{p("2620:4f:8000::/48"), "direct delegation AS112 (RFC 7534)", true},
	{p("3fff::/20"), "documentation (RFC 9637)", false},
	{p("5f00::/16"), "segment routing SIDs (RFC 9602)", false},
	{p("fc00::/7"), "unique-local (RFC 4193)", false},
	{p("fe80::/10"), "link-local (RFC 4291)", false},
	{p("fec0::/10"), "site-local, deprecated (RFC 3879)", false},
	{p("ff00::/8"), "multicast (RFC 4291)", false},
}

func p(s string) netip.Prefix { return netip.MustParsePrefix(s) }

var (
	// globalUnicast is the only IPv6 block IANA allocates for global
	// unicast (its IPv6 address space registry); the rest is reserved.
	globalUnicast = p("2000::/3")
	// nat64 is the well-known NAT64 prefix (RFC 6052): globally reachable
	// in the registry, but a NAT64 gateway forwards to the IPv4 address in
	// its last 32 bits, which must be public itself.
	nat64 = p("64:ff9b::/96")
)

// Public says whether a box may reach addr through the proxy, by the
// address alone (the host's own addresses are refused besides, see
// Proxy): a unicast address that IANA's special-purpose registries call
// globally reachable. An IPv4-mapped IPv6 address is judged as its IPv4
// address.
func Public(addr netip.Addr) bool { return nonPublic(addr) == "" }

// nonPublic names the range that makes addr not public, or is empty.
func nonPublic(addr netip.Addr) string {
	addr = addr.Unmap().WithZone("")
	if !addr.IsValid() {
		return "not an IP address"
	}
	if nat64.Contains(addr) {
		b := addr.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		if why := nonPublic(v4); why != "" {
			return fmt.Sprintf("NAT64 (RFC 6052) of %s, %s", v4, why)
		}
		return ""
	}
	best, name, global := -1, "", true
	for _, s := range special {
		if s.prefix.Bits() > best && s.prefix.Contains(addr) {
			best, name, global = s.prefix.Bits(), s.name, s.global
		}
	}
	if !global {
		return name
	}
	if addr.Is6() && !globalUnicast.Contains(addr) {
		return "outside IPv6 global unicast 2000::/3 (RFC 4291)"
	}
	return ""
}
