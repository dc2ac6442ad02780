package egress

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"
)

// BenchmarkHTTPSThroughProxy is the latency of one HTTPS GET through the
// proxy to a loopback upstream, tunnelled (a name no key lists) against
// intercepted (a listed name: TLS ended, the value put in, TLS again),
// over a kept connection and over a new connection each (CONNECT and
// handshakes included); req/s is its inverse, one client.
func BenchmarkHTTPSThroughProxy(b *testing.B) {
	ts, _ := upstream(b)
	p, proxy, trust := interceptProxy(b, ts, Config{})
	p.d.admitOne = netip.MustParseAddr("127.0.0.1")
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	for _, keep := range []bool{true, false} {
		for _, c := range []struct {
			name, host string
			roots      *x509.CertPool
		}{{"tunnelled", "localhost", roots}, {"intercepted", "example.com", trust}} {
			b.Run(fmt.Sprintf("%s/keepalive=%v", c.name, keep), func(b *testing.B) {
				cl, _ := client(b, proxy, c.roots, true)
				tr := cl.Transport.(*http.Transport)
				tr.TLSClientConfig.ServerName = "example.com"
				tr.DisableKeepAlives = !keep
				u := fmt.Sprintf("https://%s:%d/?key=%s", c.host, port, placeholder)
				hdr := http.Header{"Authorization": {"Bearer " + placeholder}}
				get(b, cl, u, hdr)
				b.ResetTimer()
				for b.Loop() {
					get(b, cl, u, hdr)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			})
		}
	}
}
