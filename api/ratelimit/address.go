package ratelimit

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientKey is the key a request's client counts under: its address as the
// api's listener saw it, or, when that peer is one of trusted (the reverse
// proxy in front, Caddy on this host), the address the proxies' own
// X-Forwarded-For names: its last entry that is not itself a trusted
// proxy, since each proxy appends the peer it saw and only the entries the
// trusted ones added are true. An IPv6 client counts under its /64, the
// least a site is given, so one host cannot take a fresh key per address.
// A peer that is not an IP address (a test's pipe) is keyed as it is.
func ClientKey(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return r.RemoteAddr
	}
	addr = addr.Unmap()
	if isTrusted(addr, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				// A hop a trusted proxy did not write: the client's own claim.
				break
			}
			addr = hop.Unmap()
			if !isTrusted(addr, trusted) {
				break
			}
		}
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
