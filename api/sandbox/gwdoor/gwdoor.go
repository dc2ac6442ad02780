// Package gwdoor is the supervisor's gw door (Contract: Model usage, Box
// API keys, "GW_API_KEY=unprovisioned ... the egress proxy injects the
// box's own key, so the guest never holds one"): a reverse proxy on the
// box network's gateway (GW_BASE_URL, http://10.203.0.1:18090/v1) to gw,
// reached directly or through the egress proxy's plain-HTTP forwarding,
// which puts the box owner's gw key in Authorization whatever the box
// sent. The key comes from the box's host-only claim env entry CBGW (api/usage),
// found by the box's bridge address, so a box can only ever spend as its
// owner; only the OpenAI API (/v1/...) is forwarded, never gw's admin API.
package gwdoor

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
)

// Door is an http.Handler; serve it on the gateway's gw port.
type Door struct {
	key func(box netip.Addr) string
	rp  *httputil.ReverseProxy
	log *slog.Logger
}

// New is a door to the gw at upstream (its origin: http or https) with
// key answering the gw key of the box at a bridge address ("" for none).
func New(upstream string, key func(box netip.Addr) string, log *slog.Logger) (*Door, error) {
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gw door: %q is not an http(s) origin", upstream)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Door{key: key, log: log}
	d.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = u.Host
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			d.log.Warn("gw door: gw did not answer", "box", r.RemoteAddr, "err", err)
			fail(w, http.StatusBadGateway, "gw_unavailable", "gw did not answer; try again")
		},
	}
	return d, nil
}

// fail writes OpenAI's error body, which the box's clients show.
func fail(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

// apiPath says whether p (decoded) is under /v1/ with no dot segment,
// which gw's router could resolve to a path outside it.
func apiPath(p string) bool {
	if !strings.HasPrefix(p, "/v1/") {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// ServeHTTP forwards a request under /v1/ with the box's key, and answers
// any other path 404 and a box without a key 503 (its owner has none
// yet, or is disabled), each in OpenAI's error body.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !apiPath(r.URL.Path) {
		fail(w, http.StatusNotFound, "not_found_error", "the gw door serves the OpenAI API under /v1/ only")
		return
	}
	var box netip.Addr
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		box = ap.Addr().Unmap()
	}
	key := d.key(box)
	if key == "" {
		fail(w, http.StatusServiceUnavailable, "gw_key_missing", "this box has no gw key now (its owner has none yet, or is disabled); it comes with the box's next key push, wake or boot")
		return
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+key)
	r.URL.Scheme, r.URL.Host = "", "" // a proxied request's absolute form
	d.rp.ServeHTTP(w, r)
}
