package egress

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestPublicRefusesEveryNonPublicRange(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": false, "10.203.0.1": false, "172.17.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false, "::1": false,
		"fe80::1": false, "fd00::1": false, "::ffff:127.0.0.1": false, "224.0.0.1": false,
		"151.101.2.132": true, "2a04:4e42::644": true,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// A box that asks the proxy for the host's loopback or a name outside the
// allowed hosts gets 403 and no connection.
func TestProxyRefusesNonPublicAndUnlistedDestinations(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	reached := make(chan struct{}, 1)
	go func() {
		if c, err := target.Accept(); err == nil {
			reached <- struct{}{}
			c.Close()
		}
	}()
	srv := httptest.NewServer(&Proxy{Hosts: []string{"debian.org"}})
	defer srv.Close()
	for _, dest := range []string{target.Addr().String(), "example.com:443", "localhost:" + fmt.Sprint(target.Addr().(*net.TCPAddr).Port)} {
		c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("CONNECT %s: %s, want 403", dest, resp.Status)
		}
	}
	select {
	case <-reached:
		t.Fatal("the proxy connected to the loopback listener")
	default:
	}
}
