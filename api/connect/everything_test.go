package connect_test

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/internal/syncbuf"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// everythingVersion is the pinned @modelcontextprotocol/server-everything
// tests/setup-host caches.
const everythingVersion = "2026.8.31"

// publicName is the name the tests give the server: the resolver the api
// is built with sends it, and it alone, to the server on loopback
// (connect.UpstreamConfig.Resolve); httptest's certificate names it.
const publicName = "example.com"

// everything is the real MCP reference server over streamable HTTP,
// behind a TLS front that refuses (401) a request without its key in
// header and counts those with it.
type everything struct {
	URL    string // https://example.com:PORT/mcp
	Header string
	Key    string
	Addr   string // the front's 127.0.0.1:PORT, for the refusal tests
	keyed  atomic.Int64
	roots  *x509.CertPool
}

// Upstream is the api's outbound settings that reach e under publicName.
func (e *everything) Upstream() connect.UpstreamConfig {
	return connect.UpstreamConfig{Resolve: map[string]netip.Addr{publicName: netip.MustParseAddr("127.0.0.1")}, Roots: e.roots}
}

func startEverything(t *testing.T) *everything {
	t.Helper()
	cache := os.Getenv("COCOONBOX_CACHE")
	if cache == "" {
		cache = "/var/cache/cocoonbox"
	}
	bin := filepath.Join(cache, "npm/server-everything-"+everythingVersion, "node_modules/.bin/mcp-server-everything")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("@modelcontextprotocol/server-everything@%s is not at %s (tests/setup-host installs it): %v", everythingVersion, bin, err)
	}
	port := freePort(t)
	cmd := exec.Command("node", bin, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server-everything: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	backend := "127.0.0.1:" + strconv.Itoa(port)
	wait.Eventually(t, 60*time.Second, "server-everything listening on "+backend, func() (bool, string) {
		c, err := net.Dial("tcp", backend)
		if err != nil {
			return false, fmt.Sprintf("%v; it wrote:\n%s", err, out.String())
		}
		c.Close()
		return true, ""
	})
	e := &everything{Header: "X-Everything-Key", Key: "key-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: backend})
	proxy.FlushInterval = -1
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(e.Header) != e.Key {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		e.keyed.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	front.StartTLS()
	t.Cleanup(front.Close)
	e.roots = x509.NewCertPool()
	e.roots.AddCert(front.Certificate())
	e.Addr = front.Listener.Addr().String()
	_, p, _ := net.SplitHostPort(e.Addr)
	e.URL = fmt.Sprintf("https://%s:%s/mcp", publicName, p)
	return e
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// bearer sends a token on every request of an MCP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
