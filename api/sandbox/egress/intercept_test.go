package egress

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// seen is what an upstream received.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *seen) last(t testing.TB) *http.Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("the upstream saw no request")
	}
	return s.reqs[len(s.reqs)-1]
}

// upstream is an HTTPS server on loopback (HTTP/2 and HTTP/1.1) whose
// certificate names example.com; it answers "up" and records requests.
func upstream(t testing.TB) (*httptest.Server, *seen) {
	t.Helper()
	s := &seen{}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.mu.Unlock()
		fmt.Fprint(w, "up ", r.Proto)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts, s
}

const (
	placeholder = "sk-proj-cbv_0123456789abcdef0123456789abcdef"
	realValue   = "sk-proj-REAL&value=1"
)

// interceptProxy is a Proxy with a pool CA whose one box (loopback, where
// the test's client connects from) has two keys for example.com, one in
// Authorization and one in ?key=, sent to the test's upstream by Resolve.
func interceptProxy(t testing.TB, ts *httptest.Server, cfg Config) (*Proxy, string, *x509.CertPool) {
	t.Helper()
	certPEM, keyPEM, err := NewCAPEM()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ParseCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	cfg.CA, cfg.UpstreamRoots = ca, roots
	cfg.Resolve = map[string]netip.Addr{"example.com": netip.MustParseAddr("127.0.0.1")}
	if cfg.Injections == nil {
		cfg.Injections = func(box netip.Addr) []Injection {
			if box != netip.MustParseAddr("127.0.0.1") {
				return nil
			}
			return []Injection{
				{Placeholder: placeholder, Value: "Bearer " + realValue, Hosts: []string{"example.com"}, How: "Authorization: Bearer {}"},
				{Placeholder: placeholder, Value: realValue, Hosts: []string{"example.com"}, How: "?key={}"},
			}
		}
	}
	p, proxy := newProxy(t, cfg)
	trust := x509.NewCertPool()
	trust.AddCert(ca.Certificate())
	return p, proxy, trust
}

// client is an HTTPS client through proxy trusting roots, speaking h2
// when h2 is set, HTTP/1.1 only otherwise; it reports the fingerprint of
// each leaf it was shown.
func client(t testing.TB, proxy string, roots *x509.CertPool, h2 bool) (*http.Client, func() [32]byte) {
	t.Helper()
	var mu sync.Mutex
	var fp [32]byte
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxy}),
		TLSClientConfig: &tls.Config{RootCAs: roots, VerifyConnection: func(cs tls.ConnectionState) error {
			mu.Lock()
			fp = sha256.Sum256(cs.PeerCertificates[0].Raw)
			mu.Unlock()
			return nil
		}},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, func() [32]byte { mu.Lock(); defer mu.Unlock(); return fp }
}

func get(t testing.TB, c *http.Client, u string, hdr http.Header) string {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header = hdr
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return string(b)
}

// Issue 26, Deliver 5: on a host a box's key lists, the proxy puts the
// value in the configured header and query parameter and nowhere else
// (the placeholder in another header, another parameter and the path
// stays), over HTTP/2 and HTTP/1.1 both; the box is shown a leaf of the
// pool CA, not the upstream's certificate.
func TestInterceptedHostGetsTheValueInItsHeaderAndParameterOnly(t *testing.T) {
	ts, s := upstream(t)
	_, proxy, trust := interceptProxy(t, ts, Config{})
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	upFP := sha256.Sum256(ts.Certificate().Raw)
	for _, h2 := range []bool{true, false} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			c, fp := client(t, proxy, trust, h2)
			u := fmt.Sprintf("https://example.com:%d/v1/%s?key=%s&other=%s", port, placeholder, placeholder, placeholder)
			hdr := http.Header{"Authorization": {"Bearer " + placeholder}, "X-Other": {placeholder}}
			body := get(t, c, u, hdr)
			want := "HTTP/1.1"
			if h2 {
				want = "HTTP/2.0"
			}
			if !strings.Contains(body, "up") {
				t.Fatalf("body %q", body)
			}
			r := s.last(t)
			if r.Proto != want {
				t.Errorf("the upstream got %s, want %s", r.Proto, want)
			}
			if got := r.Header.Get("Authorization"); got != "Bearer "+realValue {
				t.Errorf("Authorization %q, want the value", got)
			}
			if got := r.URL.Query().Get("key"); got != realValue {
				t.Errorf("?key=%q, want the value", got)
			}
			if got := r.Header.Get("X-Other"); got != placeholder {
				t.Errorf("X-Other %q, want the placeholder", got)
			}
			if got := r.URL.Query().Get("other"); got != placeholder {
				t.Errorf("?other=%q, want the placeholder", got)
			}
			if !strings.Contains(r.URL.Path, placeholder) {
				t.Errorf("path %q lost the placeholder", r.URL.Path)
			}
			if fp() == upFP {
				t.Error("the box was shown the upstream's certificate: not intercepted")
			}
		})
	}
}

// A CONNECT that no key of the asking box lists is tunnelled: the box
// sees the upstream's own certificate (same fingerprint) and the upstream
// sees the placeholder where a listed host gets the value. Unlisted are a
// name no key lists, a name another box's key lists, and an address even
// when a key lists it (an address is never intercepted).
func TestUnlistedHostIsTunnelledUntouched(t *testing.T) {
	ts, s := upstream(t)
	other := netip.MustParseAddr("10.203.0.9")
	keys := func(box netip.Addr) []Injection {
		hosts := []string{"example.com", "127.0.0.1"}
		if box == other {
			hosts = append(hosts, "localhost")
		}
		return []Injection{{Placeholder: placeholder, Value: "Bearer " + realValue, Hosts: hosts, How: "Authorization: Bearer {}"}}
	}
	p, proxy, _ := interceptProxy(t, ts, Config{Injections: keys})
	// The upstream is on loopback, which a tunnel must reach here.
	p.d.admitOne = netip.MustParseAddr("127.0.0.1")
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	for _, host := range []string{"localhost", "127.0.0.1"} {
		t.Run(host, func(t *testing.T) {
			c, fp := client(t, proxy, roots, true)
			c.Transport.(*http.Transport).TLSClientConfig.ServerName = "example.com"
			get(t, c, fmt.Sprintf("https://%s:%d/", host, port), http.Header{"Authorization": {"Bearer " + placeholder}})
			if got := s.last(t).Header.Get("Authorization"); got != "Bearer "+placeholder {
				t.Errorf("Authorization %q, want the placeholder", got)
			}
			if fp() != sha256.Sum256(ts.Certificate().Raw) {
				t.Error("the box was not shown the upstream's certificate")
			}
		})
	}
}

// A ClientHello naming another server than the CONNECT's host gets no
// leaf: the handshake fails and the upstream sees nothing.
func TestInterceptedConnectWithAnotherServerNameCloses(t *testing.T) {
	ts, s := upstream(t)
	_, proxy, trust := interceptProxy(t, ts, Config{})
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dest := fmt.Sprintf("example.com:%d", ts.Listener.Addr().(*net.TCPAddr).Port)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "other.example", RootCAs: trust, InsecureSkipVerify: true})
	if err := tc.HandshakeContext(context.Background()); err == nil {
		t.Fatal("a handshake for other.example through a CONNECT to example.com succeeded")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) != 0 {
		t.Errorf("the upstream saw %d requests", len(s.reqs))
	}
}

// Interception comes after every refusal: a listed host outside
// --egress-hosts, and a listed host whose name resolves to loopback
// (no Resolve entry), are refused as any other.
func TestEveryRefusalAppliesToAnInterceptedHost(t *testing.T) {
	ts, _ := upstream(t)
	keys := func(netip.Addr) []Injection {
		return []Injection{{Placeholder: placeholder, Value: realValue, Hosts: []string{"example.com", "localhost"}, How: "X-Api-Key: {}"}}
	}
	_, proxy, _ := interceptProxy(t, ts, Config{Hosts: []string{"debian.org"}, Injections: keys})
	connectAll(t, proxy, map[string]string{"example.com:443": "not among the allowed hosts"})
	_, proxy, _ = interceptProxy(t, ts, Config{Injections: keys})
	connectAll(t, proxy, map[string]string{"localhost:443": "not a public address", "127.0.0.1:443": "not a public address"})
}

// The upstream of an intercepted host is verified: one whose certificate
// the roots do not hold gets no request, and the box gets 502 saying why.
func TestInterceptedUpstreamIsVerified(t *testing.T) {
	ts, s := upstream(t)
	p, proxy, trust := interceptProxy(t, ts, Config{})
	p.cfg.UpstreamRoots = x509.NewCertPool() // not the upstream's
	c, _ := client(t, proxy, trust, true)
	resp, err := c.Get(fmt.Sprintf("https://example.com:%d/", ts.Listener.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "certificate") {
		t.Errorf("an unverified upstream: %d %q", resp.StatusCode, body)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) != 0 {
		t.Errorf("the unverified upstream got %d requests", len(s.reqs))
	}
}

// A box speaking HTTP/2 to a listed host whose upstream speaks HTTP/1.1
// only is served still: the upstream gets HTTP/1.1 with the value.
func TestInterceptedHTTP2BoxReachesAnHTTP1Upstream(t *testing.T) {
	s := &seen{}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.mu.Unlock()
	}))
	ts.StartTLS() // no EnableHTTP2
	t.Cleanup(ts.Close)
	_, proxy, trust := interceptProxy(t, ts, Config{})
	c, _ := client(t, proxy, trust, true)
	get(t, c, fmt.Sprintf("https://example.com:%d/", ts.Listener.Addr().(*net.TCPAddr).Port), http.Header{"Authorization": {"Bearer " + placeholder}})
	r := s.last(t)
	if r.Proto != "HTTP/1.1" || r.Header.Get("Authorization") != "Bearer "+realValue {
		t.Errorf("the upstream got %s with Authorization %q", r.Proto, r.Header.Get("Authorization"))
	}
}
