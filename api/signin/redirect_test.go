package signin

import (
	"testing"
)

// Contract: Browser sign-in and device tokens: redirect URI
// http://127.0.0.1/callback on any port (RFC 8252 §7.3), and nothing else.
func TestRedirectURIIsLoopbackCallbackOnAnyPort(t *testing.T) {
	for _, ok := range []string{
		"http://127.0.0.1:1/callback",
		"http://127.0.0.1:41234/callback",
		"http://127.0.0.1:65535/callback",
	} {
		if err := CheckRedirectURI(ok); err != nil {
			t.Errorf("CheckRedirectURI(%q) = %v, want accepted", ok, err)
		}
	}
}

// Bad input: a redirect URI that is not http://127.0.0.1:<port>/callback.
func TestRedirectURIRefused(t *testing.T) {
	for _, bad := range []string{
		"",
		"http://127.0.0.1/callback",               // no port: the client's port is the point
		"http://127.0.0.1:0/callback",             // port 0 is no listener
		"http://127.0.0.1:65536/callback",         // out of range
		"http://127.0.0.1:080/callback",           // leading zero: not the canonical spelling
		"http://127.0.0.1:+80/callback",           // a sign
		"http://127.0.0.1:8080/other",             // another path
		"http://127.0.0.1:8080/callback/",         // another path
		"http://127.0.0.1:8080/callback?x=1",      // a query
		"http://127.0.0.1:8080/callback?",         // an empty query
		"http://127.0.0.1:8080/callback#x",        // a fragment
		"http://user@127.0.0.1:8080/callback",     // user info
		"http://127.0.0.1:8080@evil.com/callback", // user info, host elsewhere
		"http://127.0.0.1.evil.com:8080/callback", // a host that starts like the loopback
		"http://localhost:8080/callback",          // localhost may resolve elsewhere (RFC 8252 §8.3)
		"http://[::1]:8080/callback",              // our clients listen on IPv4
		"https://127.0.0.1:8080/callback",         // not what the clients serve
		"HTTP://127.0.0.1:8080/callback",          // not the canonical spelling
		"http://127.0.0.2:8080/callback",          // another loopback address
		"http://127.0.0.1:8080/%63allback",        // an escaped path
		" http://127.0.0.1:8080/callback",         // white space
	} {
		if err := CheckRedirectURI(bad); err == nil {
			t.Errorf("CheckRedirectURI(%q) accepted, want refused", bad)
		}
	}
}
