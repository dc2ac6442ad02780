package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Injection is one host-only key of a box (Contract: Key vault, Box API
// keys): on a CONNECT to one of Hosts the proxy terminates TLS and puts
// Value where the box sent Placeholder, in the header or query parameter
// How names, and nowhere else.
type Injection struct {
	// Placeholder is what the box holds (the COCOONBOX_VAULT record's).
	Placeholder string
	// Value is the value as sent: a header's whole new value (the
	// template applied), or a query parameter's bare value.
	Value string
	// Hosts are lower-case DNS names, no trailing dot, no port.
	Hosts []string
	// How is "Header: template" (template with {} once) or "?param={}".
	How string
}

// boxInjections returns the injections of the box at a bridge address
// that list host; none for an IP literal. It is read at the CONNECT (to
// choose between interception and a tunnel) and again at every request
// an interception serves.
func (p *Proxy) boxInjections(box netip.Addr, host string) []Injection {
	if p.cfg.Injections == nil || p.cfg.CA == nil || !box.IsValid() {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil // never intercept an address
	}
	var out []Injection
	for _, in := range p.cfg.Injections(box.Unmap()) {
		for _, h := range in.Hosts {
			if h == host {
				out = append(out, in)
				break
			}
		}
	}
	return out
}

// canonicalHost is a CONNECT target's host as hosts are matched:
// lower-case, no trailing dot.
func canonicalHost(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// resolveTo is the context key of an address api.yaml's egress.resolve
// gives a listed host; the dial's Control admits exactly that address.
type resolveTo struct{}

// bufConn is a hijacked connection whose first bytes the server already
// buffered.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// intercept terminates the box's TLS for host with a leaf of the pool CA,
// opens TLS to the upstream over up (already dialled through every
// check), and serves the box's requests, HTTP/1.1 or HTTP/2 as ALPN
// says (interception.ServeHTTP: each request with the box's keys of the
// moment, its answer cleaned of their values). A ClientHello naming
// another server than the CONNECT did is refused. The connection is
// closed after Config.InterceptIdle without a request and
// Config.InterceptMax after the CONNECT, whatever it carries then.
func (p *Proxy) intercept(ctx context.Context, down, up net.Conn, box netip.Addr, hostport string) {
	host := canonicalHost(hostport)
	srv := tls.Server(down, &tls.Config{
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if strings.ToLower(strings.TrimSuffix(hi.ServerName, ".")) != host {
				return nil, fmt.Errorf("TLS server name %q is not the CONNECT's host %q", hi.ServerName, host)
			}
			return p.cfg.CA.leafFor(host)
		},
	})
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := srv.HandshakeContext(hctx)
	cancel()
	if err != nil {
		p.logf("egress interception handshake failed", "target", hostport, "err", err)
		down.Close()
		up.Close()
		return
	}
	// The upstream is offered what the box chose (HTTP/1.1 besides), so
	// a box speaking HTTP/1.1 is seen as such.
	alpn := []string{"http/1.1"}
	if srv.ConnectionState().NegotiatedProtocol == "h2" {
		alpn = []string{"h2", "http/1.1"}
	}
	var once sync.Once
	tr := &http.Transport{
		ForceAttemptHTTP2: true,
		// The first connection is up; one more (a closed keep-alive, a
		// second HTTP/1.1 stream under an HTTP/2 box) is dialled through
		// p.dial, with every check again.
		DialTLSContext: func(dctx context.Context, _, _ string) (net.Conn, error) {
			c := up
			var first bool
			once.Do(func() { first = true })
			if !first {
				var err error
				if c, err = p.dial(ctx, "tcp", hostport); err != nil {
					return nil, err
				}
			}
			tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: p.cfg.UpstreamRoots, NextProtos: alpn})
			if err := tc.HandshakeContext(dctx); err != nil {
				c.Close()
				return nil, fmt.Errorf("TLS to %s: %w", hostport, err)
			}
			return tc, nil
		},
		MaxIdleConnsPerHost: 1, IdleConnTimeout: 90 * time.Second,
	}
	defer tr.CloseIdleConnections()
	// up, when no request came to take it.
	defer once.Do(func() { up.Close() })
	x := &interception{p: p, box: box, host: host, hostport: hostport}
	x.serve = &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			// misdirected held the box's Host to the CONNECT's host.
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = hostport
			pr.Out.Host = pr.In.Host
			k := keysOf(pr.In.Context())
			if len(k.inj) > 0 {
				// A body answer cannot clean is one it cannot read.
				pr.Out.Header.Set("Accept-Encoding", "identity")
			}
			for _, in := range k.inj {
				inject(pr.Out, in)
			}
		},
		ModifyResponse: x.answer,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			msg := keysOf(r.Context()).v.string(err.Error())
			p.logf("egress intercepted request failed", "target", hostport, "err", msg)
			http.Error(w, "cocoonbox egress proxy: "+msg, http.StatusBadGateway)
		},
	}
	ln := &oneConn{c: srv, done: make(chan struct{})}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	hs := &http.Server{
		Handler: x, Protocols: &protos, ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout: orDefault(p.cfg.InterceptIdle, DefaultInterceptIdle),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				ln.Close()
			}
		},
	}
	// Close ends the connection and, through the requests' contexts,
	// their upstream exchanges.
	stop := time.AfterFunc(orDefault(p.cfg.InterceptMax, DefaultInterceptMax), func() { hs.Close() })
	defer stop.Stop()
	_ = hs.Serve(ln)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// inject puts in's value where the request carries its placeholder: the
// named header when its whole value is the template applied to the
// placeholder, or the named query parameter when it is the placeholder.
func inject(r *http.Request, in Injection) {
	if param, ok := strings.CutPrefix(in.How, "?"); ok {
		name, _, _ := strings.Cut(param, "=")
		parts := strings.Split(r.URL.RawQuery, "&")
		changed := false
		for i, kv := range parts {
			k, v, _ := strings.Cut(kv, "=")
			if uk, err := url.QueryUnescape(k); err != nil || uk != name {
				continue
			}
			if uv, err := url.QueryUnescape(v); err == nil && uv == in.Placeholder {
				parts[i] = k + "=" + url.QueryEscape(in.Value)
				changed = true
			}
		}
		if changed {
			r.URL.RawQuery = strings.Join(parts, "&")
		}
		return
	}
	name, tmpl, ok := strings.Cut(in.How, ":")
	if !ok {
		return
	}
	want := strings.Replace(strings.TrimSpace(tmpl), "{}", in.Placeholder, 1)
	if vs := r.Header.Values(name); len(vs) == 1 && vs[0] == want {
		r.Header.Set(name, in.Value)
	}
}

// oneConn is a listener that accepts one connection, then waits for Close.
type oneConn struct {
	mu   sync.Mutex
	c    net.Conn
	done chan struct{}
	once sync.Once
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConn) Addr() net.Addr { return dummyAddr{} }

type dummyAddr struct{}

func (dummyAddr) Network() string { return "tcp" }
func (dummyAddr) String() string  { return "intercepted" }

func (p *Proxy) logf(msg string, args ...any) {
	if p.cfg.Log != nil {
		p.cfg.Log.Info(msg, args...)
	}
}
