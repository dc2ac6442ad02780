package console

import "net/http"

// ContentSecurityPolicy is the policy of every answer of the api (OWASP's
// CSP cheat sheet): scripts, styles, images and calls of this origin only
// and no inline script or style (the console's pages load theirs as files
// of /cb/assets/), never framed, no <base> and no plugin.
const ContentSecurityPolicy = "default-src 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"

// SetPageHeaders sets what every answer of the api carries (api/apiserver
// sets them for every route): ContentSecurityPolicy, nosniff (no file is
// run as another type than it says), and no Referer (a console URL may
// carry a consent's query or an invite code).
func SetPageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}
