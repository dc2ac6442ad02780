package oauth

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// checkRedirectURI is the rule for a client's redirect URI: the three
// kinds of OAuth 2.1 §2.3.1 and RFC 8252 §7 a public client uses, and
// nothing else.
//
//   - https with a host (a web client);
//   - http on a loopback host (RFC 8252 §7.3: 127.0.0.1, [::1] or
//     localhost, any port), the CLIs' way;
//   - a private-use scheme (RFC 8252 §7.1), which must be a reversed
//     domain name, so it holds a "." (com.example.app:/cb): javascript:,
//     data:, file: and the like are not.
//
// It is absolute, without a fragment (RFC 6749 §3.1.2) or user info, and
// at most 2000 bytes.
func checkRedirectURI(s string) error {
	if len(s) > 2000 {
		return fmt.Errorf("redirect URI of %d bytes: at most 2000", len(s))
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("redirect URI %q is not an absolute URI", s)
	}
	if u.Fragment != "" || strings.Contains(s, "#") || u.User != nil {
		return fmt.Errorf("redirect URI %q has a fragment or user info", s)
	}
	switch scheme := strings.ToLower(u.Scheme); {
	case scheme == "https":
		if u.Host == "" {
			return fmt.Errorf("redirect URI %q has no host", s)
		}
	case scheme == "http":
		if !LoopbackHost(u.Hostname()) {
			return fmt.Errorf("redirect URI %q: http only on a loopback host (127.0.0.1, [::1], localhost)", s)
		}
	case strings.Contains(scheme, "."):
	default:
		return fmt.Errorf("redirect URI %q: the scheme is neither https, http on loopback, nor a private-use scheme (a reversed domain name, RFC 8252 §7.1)", s)
	}
	return nil
}

// LoopbackHost says whether host (no port, no brackets) is a loopback
// address or localhost: where OAuth allows http (RFC 8252 §7.3), for a
// redirect URI and for oauth.public_url alike.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
