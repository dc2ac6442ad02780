package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestPublicRefusesEveryNonPublicRange(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": false, "10.203.0.1": false, "172.17.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false, "::1": false,
		"fe80::1": false, "fd00::1": false, "::ffff:127.0.0.1": false, "224.0.0.1": false,
		"151.101.2.132": true, "2a04:4e42::644": true,
		// Issue 24: the documentation ranges and site-local were reachable.
		"192.0.2.2": false, "198.51.100.7": false, "203.0.113.255": false, "2001:db8::1": false,
		"3fff::1": false, "fec0::1": false, "fec0:1::1%eth0": false,
		// The rest of IANA's special-purpose registries, and the exceptions
		// inside them that it calls globally reachable.
		"192.0.0.8": false, "192.0.0.9": true, "192.88.99.1": false, "198.19.255.255": false,
		"240.0.0.1": false, "255.255.255.255": false, "192.31.196.1": true,
		"::": false, "100::1": false, "2001::1": false, "2001:2::1": false, "2001:1::1": true,
		"2001:4:112::1": true, "2002:a00:1::1": false, "5f00::1": false, "ff0e::1": false,
		"4000::1": false, "64:ff9b:1::1": false,
		// NAT64 is judged by the IPv4 address it carries.
		"64:ff9b::a00:1": false, "64:ff9b::9765:284": true, "::ffff:192.0.2.1": false,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v (%s)", addr, got, want, nonPublic(netip.MustParseAddr(addr)))
		}
	}
}

// newProxy serves a Proxy on loopback for the test's life.
func newProxy(t testing.TB, cfg Config) (*Proxy, string) {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.Close(); p.Close() })
	return p, strings.TrimPrefix(srv.URL, "http://")
}

// listen accepts on every address of the host (0.0.0.0 and [::]) and
// counts the connections that reach it.
func listen(t *testing.T) (port int, reached func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan struct{}, 1000)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			got <- struct{}{}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, func() int { return len(got) }
}

// connect sends CONNECT dest on c and answers the status and the body.
func connect(t *testing.T, c net.Conn, dest string) (int, string) {
	t.Helper()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("CONNECT %s: %v", dest, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// connectAll asks the proxy for each destination, each on a connection of
// its own opened before the first CONNECT is sent (so a count of the
// connections the host opened meanwhile is the proxy's alone), and fails
// the test on any answer but 403 with a body containing want[dest].
func connectAll(t *testing.T, proxy string, want map[string]string) {
	t.Helper()
	conns := map[string]net.Conn{}
	for dest := range want {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[dest] = c
	}
	for dest, c := range conns {
		if code, body := connect(t, c, dest); code != http.StatusForbidden || !strings.Contains(body, want[dest]) {
			t.Errorf("CONNECT %s: %d %q, want 403 saying %q", dest, code, body, want[dest])
		}
	}
}

// A box that asks the proxy for the host's loopback or a name outside the
// allowed hosts gets 403 and no connection.
func TestProxyRefusesNonPublicAndUnlistedDestinations(t *testing.T) {
	port, reached := listen(t)
	_, listed := newProxy(t, Config{Hosts: []string{"debian.org"}})
	connectAll(t, listed, map[string]string{"example.com:443": "not among the allowed hosts",
		fmt.Sprintf("127.0.0.1:%d", port): "loopback", "151.101.2.132:443": "not among the allowed hosts"})
	_, open := newProxy(t, Config{})
	connectAll(t, open, map[string]string{fmt.Sprintf("127.0.0.1:%d", port): "loopback",
		fmt.Sprintf("localhost:%d", port): "resolves to a refused address"})
	if n := reached(); n != 0 {
		t.Fatalf("the proxy connected to the host's listener %d times", n)
	}
}

// Issue 24: "CONNECT <host address>:PORT reached a service bound to
// 0.0.0.0". Every address on every interface of this host is refused
// (whatever its range), and the service on 0.0.0.0 and [::] is never
// reached.
func TestProxyRefusesEveryAddressOfThisHost(t *testing.T) {
	port, reached := listen(t)
	p, proxy := newProxy(t, Config{})
	want := map[string]string{}
	for a := range *p.d.host.set.Load() {
		want[net.JoinHostPort(a.String(), fmt.Sprint(port))] = "refused"
	}
	if len(want) < 2 {
		t.Fatalf("the host's addresses: %v, want loopback and more", want)
	}
	connectAll(t, proxy, want)
	if n := reached(); n != 0 {
		t.Fatalf("the proxy connected to the host's listener %d times", n)
	}
}

// The dial hook checks the address the socket connects to, whatever
// resolved it: a dial that skipped resolve's check (a DNS answer changed
// between the check and the dial: rebinding) is refused before connect.
// Only local addresses here: the non-local ones are dialled in a network
// namespace of the test's own (TestProxyRefusesEveryHostAddressBeforeAnyPacket).
func TestTheDialHookRefusesAnAddressTheResolveStepDidNotCheck(t *testing.T) {
	port, reached := listen(t)
	p, _ := newProxy(t, Config{})
	for _, addr := range []string{"127.0.0.1", "::1", "127.0.0.2"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := p.d.raw.DialContext(ctx, "tcp", net.JoinHostPort(addr, fmt.Sprint(port)))
		cancel()
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("dial %s through the proxy's dialer: %v, want ErrRefused", addr, err)
		}
	}
	if n := reached(); n != 0 {
		t.Fatalf("the dialer connected to the host's listener %d times", n)
	}
}
