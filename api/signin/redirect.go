package signin

import (
	"fmt"
	"strconv"
	"strings"
)

// CheckRedirectURI accepts exactly the loopback redirect URI of RFC 8252 §7.3
// as the first-party clients use it: "http://127.0.0.1:PORT/callback", PORT a
// decimal 1-65535 without leading zeros. Everything else is refused, so a
// sign-in can never send a code anywhere but a port on this machine's IPv4
// loopback:
//   - "localhost" (RFC 8252 §8.3: it may resolve elsewhere; the clients listen on 127.0.0.1),
//   - [::1] (our clients never listen there),
//   - another path, a query, a fragment, user info ("http://127.0.0.1:1@evil.com/callback"),
//   - a host that only starts like the loopback ("127.0.0.1.evil.com"),
//   - https, upper-case spellings, a missing port.
//
// The check compares the URI with its one canonical spelling, so no
// parser difference between us and a browser can widen it.
func CheckRedirectURI(raw string) error {
	const prefix, suffix = "http://127.0.0.1:", "/callback"
	port, ok := strings.CutPrefix(raw, prefix)
	if ok {
		port, ok = strings.CutSuffix(port, suffix)
	}
	if !ok {
		return fmt.Errorf("redirect_uri %q is not http://127.0.0.1:PORT/callback (RFC 8252 §7.3 loopback)", raw)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return fmt.Errorf("redirect_uri %q: the port must be a number from 1 to 65535", raw)
	}
	return nil
}
