package oauth

import (
	"context"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

// Issue 37, Deliver 6: "the OAuth client-metadata fetch checks
// egress.Public but not the host's own addresses", so on a host with a
// public address a signed-in user could probe the host's own TLS
// services through the consent page. The test runs itself again in a
// network namespace of its own, where an interface carries the public
// address 1.2.3.4 and a TLS server listens on it: the production fetcher
// (no loopback) is refused, naming the rule, and the server sees no
// connection.
func TestTheMetadataFetchRefusesAPublicAddressOfThisHost(t *testing.T) {
	if testenv.InOwnNetNS(t) {
		fetchInNamespace(t)
	}
}

func fetchInNamespace(t *testing.T) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	lo, err := netlink.LinkByName("lo")
	must(err)
	must(netlink.LinkSetUp(lo))
	must(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up0"}, PeerName: "up1"}))
	up0, err := netlink.LinkByName("up0")
	must(err)
	must(netlink.LinkSetUp(up0))
	addr, err := netlink.ParseAddr("1.2.3.4/24")
	must(err)
	must(netlink.AddrAdd(up0, addr))
	ln, err := net.Listen("tcp", "1.2.3.4:0")
	must(err)
	var conns atomic.Int32
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	s.Listener.Close()
	s.Listener = ln
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.StartTLS()
	defer s.Close()
	roots := x509.NewCertPool()
	roots.AddCert(s.Certificate())
	// The certificate names 127.0.0.1: the check must come before TLS,
	// and a fetch reaching the server fails otherwise.
	f := newFetcher(t, FetcherConfig{TestRoots: roots})
	_, err = f.Fetch(context.Background(), s.URL+"/client.json")
	if err == nil || !strings.Contains(err.Error(), "1.2.3.4 is an address of this host") {
		t.Errorf("fetch %s/client.json: %v, want refused as an address of this host", s.URL, err)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the host's server saw %d connections", n)
	}
}
