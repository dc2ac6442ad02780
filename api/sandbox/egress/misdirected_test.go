package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// interceptedConn CONNECTs to dest through proxy and answers the TLS
// connection inside, for serverName, speaking proto (ALPN).
func interceptedConn(t testing.TB, proxy, dest, serverName string, trust *x509.CertPool, proto string) *tls.Conn {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", dest, resp, err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: serverName, RootCAs: trust, NextProtos: []string{proto}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		t.Fatalf("TLS through CONNECT %s: %v", dest, err)
	}
	return tc
}

// Issue 37: "the key's value goes to whatever Host the box names". A
// request on a connection intercepted for example.com whose Host
// (HTTP/1.1), :authority (HTTP/2) or absolute-form URI names another
// host gets 421 from the proxy, naming the rule, and the upstream sees
// nothing; the same host with another port, in upper case or with a
// trailing dot, is the same host (the control: it gets the value).
func TestARequestNamingAnotherHostThanItsConnectGetsNoKey(t *testing.T) {
	ts, s := upstream(t)
	_, proxy, trust := interceptProxy(t, ts, Config{})
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	hdr := func() http.Header { return http.Header{"Authorization": {"Bearer " + placeholder}} }
	count := func() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.reqs) }
	for _, h2 := range []bool{true, false} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			c, _ := client(t, proxy, trust, h2)
			before := count()
			req, _ := http.NewRequest("GET", fmt.Sprintf("https://example.com:%d/?key=%s", port, placeholder), nil)
			req.Header, req.Host = hdr(), "attacker.example"
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(string(body), "misdirected request") {
				t.Errorf("Host attacker.example: %d %q, want 421 naming the rule", resp.StatusCode, body)
			}
			if n := count() - before; n != 0 {
				t.Errorf("the upstream saw %d requests for attacker.example (Host %q, Authorization %q)", n, s.last(t).Host, s.last(t).Header.Get("Authorization"))
			}
			req.Host = fmt.Sprintf("EXAMPLE.com.:%d", port+1)
			get(t, c, req.URL.String(), hdr()) // the connection still serves
			resp, err = c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || s.last(t).Header.Get("Authorization") != "Bearer "+realValue {
				t.Errorf("Host %s: %d, the upstream got Authorization %q", req.Host, resp.StatusCode, s.last(t).Header.Get("Authorization"))
			}
		})
	}
	t.Run("absolute-form", func(t *testing.T) {
		dest := fmt.Sprintf("example.com:%d", port)
		tc := interceptedConn(t, proxy, dest, "example.com", trust, "http/1.1")
		before := count()
		fmt.Fprintf(tc, "GET https://attacker.example/?key=%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", placeholder, dest, placeholder)
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(string(body), "misdirected request") {
			t.Errorf("absolute-form URI for attacker.example: %d %q, want 421 naming the rule", resp.StatusCode, body)
		}
		if n := count() - before; n != 0 {
			t.Errorf("the upstream saw %d requests (Host %q)", n, s.last(t).Host)
		}
	})
}
