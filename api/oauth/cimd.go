package oauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox/egress"
)

// Bounds of one metadata document fetch: the MCP spec's 5 KiB, and a
// time that a slow or silent host cannot stretch.
const (
	MaxDocument  = 5 << 10
	FetchTimeout = 5 * time.Second
	// maxCache bounds how long a document is kept whatever its headers
	// say, and maxEntries how many are.
	maxCache   = 24 * time.Hour
	maxEntries = 1024
)

// FetcherConfig configures a Fetcher. Production sets none of it.
type FetcherConfig struct {
	// TestAllowLoopback lets the fetcher dial loopback addresses
	// (egress.DialerConfig.TestAllowLoopback) and
	// TestRoots replaces the system's roots: for a test's httptest TLS
	// server on 127.0.0.1. Never set outside tests.
	TestAllowLoopback bool
	TestRoots         *x509.CertPool
	// Now is the clock of the cache (time.Now when nil).
	Now func() time.Time
}

// Fetcher fetches Client ID Metadata Documents (the draft the MCP
// authorization of 2025-11-25 adopts) strictly: https only, public
// addresses only and none of the host's own (egress.Dialer: checked on
// the address dialled, after resolution, so a name that resolves to
// 10.0.0.1 or to the host's public address, or rebinds between lookups,
// never reaches the host or its network), at most MaxDocument bytes within
// FetchTimeout, no redirects, and cached as its Cache-Control or Expires
// says. Safe for concurrent use.
type Fetcher struct {
	dialer *egress.Dialer
	client *http.Client
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	client  Client
	expires time.Time
}

// NewFetcher is a Fetcher of cfg. Its connections go through an
// egress.Dialer, the egress proxy's: public addresses only, never the
// host's own (a consent page must not probe the host's TLS services). It
// fails when the Dialer cannot follow the host's addresses; Close stops
// following them.
func NewFetcher(cfg FetcherConfig) (*Fetcher, error) {
	dialer, err := egress.NewDialer(egress.DialerConfig{Timeout: FetchTimeout, TestAllowLoopback: cfg.TestAllowLoopback})
	if err != nil {
		return nil, fmt.Errorf("client metadata fetcher: %w", err)
	}
	tr := &http.Transport{
		Proxy:                  nil, // the address checked is the one dialled
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: cfg.TestRoots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    FetchTimeout,
		ResponseHeaderTimeout:  FetchTimeout,
		MaxResponseHeaderBytes: 16 << 10,
		DisableCompression:     true, // the bound is on the bytes sent
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Fetcher{dialer: dialer, now: now, cache: map[string]cached{}, client: &http.Client{
		Transport: tr,
		Timeout:   FetchTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}, nil
}

// Close stops the fetcher's Dialer following the host's addresses; a
// Fetch after it still refuses what the addresses were then.
func (f *Fetcher) Close() { f.dialer.Close() }

// IsDocumentURL says whether a client_id names a metadata document
// rather than a registered client: it starts with https:// (a registered
// id is hex digits).
func IsDocumentURL(clientID string) bool { return strings.HasPrefix(clientID, "https://") }

// checkDocumentURL is the draft's §3 rule for a client_id URL: https, a
// host, a path other than "/", no fragment, no user info, no "." or ".."
// segment.
func checkDocumentURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("client_id %q: a metadata document's URL is https with a host", s)
	}
	if u.Path == "" || u.Path == "/" || u.Fragment != "" || strings.Contains(s, "#") || u.User != nil {
		return nil, fmt.Errorf("client_id %q: a metadata document's URL has a path and no fragment or user info", s)
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return nil, fmt.Errorf("client_id %q: a metadata document's URL has no . or .. segment", s)
		}
	}
	return u, nil
}

// Fetch answers the client whose client_id is the URL id, from the cache
// while its document is fresh. Its errors wrap ErrInvalidMetadata or
// ErrInvalidRedirectURI for a document the api refuses, and name the URL
// and the rule; a fetch that fails (a private address, a redirect, a
// size or time over its bound, a status other than 200) says so.
func (f *Fetcher) Fetch(ctx context.Context, id string) (Client, error) {
	u, err := checkDocumentURL(id)
	if err != nil {
		return Client{}, fmt.Errorf("%w: %v", ErrInvalidMetadata, err)
	}
	f.mu.Lock()
	c, ok := f.cache[id]
	f.mu.Unlock()
	if ok && f.now().Before(c.expires) {
		return c.client, nil
	}
	client, ttl, err := f.fetch(ctx, u)
	if err != nil {
		return Client{}, fmt.Errorf("client metadata document %s: %w", id, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ttl > 0 {
		if len(f.cache) >= maxEntries {
			f.sweep()
		}
		if len(f.cache) < maxEntries {
			f.cache[id] = cached{client: client, expires: f.now().Add(ttl)}
		}
	} else {
		delete(f.cache, id)
	}
	return client, nil
}

// sweep drops the stale entries (f.mu held).
func (f *Fetcher) sweep() {
	now := f.now()
	for k, c := range f.cache {
		if !now.Before(c.expires) {
			delete(f.cache, k)
		}
	}
}

// fetch gets and checks the document at u: the client and how long it
// may be kept.
func (f *Fetcher) fetch(ctx context.Context, u *url.URL) (Client, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Client{}, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return Client{}, 0, f.timedOut(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return Client{}, 0, fmt.Errorf("answered %s to %s: redirects are not followed", resp.Status, resp.Header.Get("Location"))
	}
	if resp.StatusCode != http.StatusOK {
		return Client{}, 0, fmt.Errorf("answered %s, want 200", resp.Status)
	}
	if resp.ContentLength > MaxDocument {
		return Client{}, 0, fmt.Errorf("of %d bytes: at most %d", resp.ContentLength, MaxDocument)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocument+1))
	if err != nil {
		return Client{}, 0, f.timedOut(ctx, err)
	}
	if len(b) > MaxDocument {
		return Client{}, 0, fmt.Errorf("over %d bytes", MaxDocument)
	}
	c, err := parseDocument(u.String(), b)
	if err != nil {
		return Client{}, 0, err
	}
	return c, freshFor(resp.Header, f.now()), nil
}

// timedOut names the bound when err is the fetch's own timeout rather
// than the caller's end.
func (f *Fetcher) timedOut(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("not fetched within %s: %w", FetchTimeout, err)
	}
	return err
}

// parseDocument checks a metadata document fetched from id: the client
// metadata of a public client (parseMetadata) whose client_id is id,
// compared as strings (the draft's §4.1).
func parseDocument(id string, b []byte) (Client, error) {
	m, err := parseMetadata(b)
	if err != nil {
		return Client{}, err
	}
	if m.ClientID != id {
		return Client{}, fmt.Errorf("%w: client_id %q is not the document's URL %q", ErrInvalidMetadata, m.ClientID, id)
	}
	u, _ := url.Parse(id) // checked by checkDocumentURL
	return Client{ID: id, Name: m.ClientName, RedirectURIs: m.RedirectURIs, VerifiedHost: u.Host, GrantTypes: m.GrantTypes}, nil
}

// freshFor is how long a response may be kept (RFC 9111 §4.2.1):
// Cache-Control's max-age, else Expires less Date (or now); none, no-store
// or no-cache keep nothing. At most maxCache.
func freshFor(h http.Header, now time.Time) time.Duration {
	var ttl time.Duration
	maxAge := false
	for _, d := range strings.Split(strings.Join(h.Values("Cache-Control"), ","), ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
		switch strings.ToLower(name) {
		case "no-store", "no-cache":
			return 0
		case "max-age":
			n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64)
			if err != nil || n < 0 {
				return 0
			}
			maxAge, ttl = true, time.Duration(min(n, int64(maxCache/time.Second)))*time.Second
		}
	}
	if !maxAge && h.Get("Expires") != "" {
		exp, err := http.ParseTime(h.Get("Expires"))
		if err != nil {
			return 0 // RFC 9111 §5.3: an invalid Expires is in the past
		}
		date := now
		if d, err := http.ParseTime(h.Get("Date")); err == nil {
			date = d
		}
		ttl = exp.Sub(date)
	}
	return max(0, min(ttl, maxCache))
}
