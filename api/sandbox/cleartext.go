package sandbox

import "net/netip"

// CleartextHost says whether a sandboxd on TCP at host may speak
// cleartext: localhost or a loopback address literal. Anywhere else the
// bearer token (root over every box of that host) and every exec's input
// and output would cross the network readable, so the daemon serves TLS
// and the api dials https:// (docs/boxes.md, the wire protocol). Both
// ends apply this one rule.
func CleartextHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
