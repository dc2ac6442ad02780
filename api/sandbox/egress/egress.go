// Package egress is the supervisor's HTTP(S) egress proxy: the one way out
// of a box (HTTP_PROXY and HTTPS_PROXY in the box name it, on the box
// network's gateway). It forwards plain HTTP requests and tunnels CONNECT,
// and refuses any destination that is not a public address or is one of
// the host's own, so a box cannot reach the host's services (on loopback
// // or on its public address), other boxes or a private network through it.
// For a CONNECT to a host a box's key lists it terminates TLS with a leaf
// of the pool's CA and swaps the key's placeholder for its value in the
// key's header or query parameter of each request that names the
// CONNECT's host, with the keys of that moment, and the value back for
// the placeholder in the answers (intercept.go, request.go, scrub.go;
// Contract: Key vault, Box API keys, Connect injection); any other
// CONNECT is tunnelled untouched.
package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Config is a Proxy's settings.
type Config struct {
	// Hosts, when not empty, are the only destinations: a host name equal
	// to one or below it ("debian.org" allows "deb.debian.org").
	Hosts []string
	// Admit are networks reached although not public (ParseAdmit's rules;
	// an internal mirror, or the demo's documentation-range one): the
	// only way past the range rule. The host's own addresses stay
	// refused. New logs each as a warning.
	Admit []netip.Prefix
	// Log gets one line per refused or failed request.
	Log *slog.Logger
	// Resolver resolves host names (net.DefaultResolver when nil).
	Resolver *net.Resolver

	// CA mints the leaves of intercepted hosts; nil intercepts nothing.
	CA *CA
	// Injections returns the host-only keys of the box at a bridge
	// address (nil for none). It is called on every CONNECT and again on
	// every request of an intercepted connection (so a key deleted or
	// rotated stops at once on connections already open): it must not
	// wait on anything slow (the supervisor answers from a snapshot).
	Injections func(box netip.Addr) []Injection
	// InterceptIdle closes an intercepted connection that carried no
	// request for this long (HTTP/1.1: between requests; HTTP/2: with no
	// stream open); DefaultInterceptIdle when 0.
	InterceptIdle time.Duration
	// InterceptMax closes an intercepted connection this long after its
	// CONNECT, whatever it carries then (a request in flight is cut, its
	// upstream exchange cancelled); DefaultInterceptMax when 0. A box's
	// client opens another: the bound is how long a connection lives on
	// keys read at its start (its TLS, its upstream's identity).
	InterceptMax time.Duration
	// ScrubBodyLimit is how many bytes of each answer's body, from its
	// start, an interception cleans of the request's key values
	// (values): DefaultScrubBodyLimit when 0, none when negative. The
	// rest of a longer body goes to the box as it comes.
	ScrubBodyLimit int64
	// UpstreamRoots verify an intercepted host's upstream (the system
	// roots when nil; api.yaml sandbox.local.egress.upstream_ca_file).
	UpstreamRoots *x509.CertPool
	// Resolve sends a host to an address instead of DNS, for tests and
	// the demo (api.yaml sandbox.local.egress.resolve). It applies only to
	// a CONNECT the asking box's keys list (any other resolves as usual),
	// and the address is admitted even when it is not public, exactly for
	// that dial; the host list and every other rule still apply.
	Resolve map[string]netip.Addr
	// Doors are the gateway's own services a box reaches by plain HTTP
	// through the proxy, by host:port (the gw door at 10.203.0.1:18090):
	// such a request is served by its handler, with the box's address as
	// RemoteAddr, never dialled (the host's own addresses stay refused).
	Doors map[string]http.Handler
}

// Proxy is an http.Handler; serve it on the gateway. It dials through a
// Dialer (public addresses only, not the host's own, each checked on the
// name's resolved addresses and again on the address the socket is about
// to connect to, before any packet leaves) and, when Config.Hosts is set,
// to those names only. It answers a request that is neither an absolute
// http:// URL nor CONNECT with 400, a refused destination (ErrRefused)
// with 403, and a destination it cannot reach with 502, each with a
// text/plain line saying why.
type Proxy struct {
	cfg       Config
	d         *Dialer
	transport *http.Transport // forwards plain HTTP
}

// The intercepted connection's limits when Config sets none.
const (
	DefaultInterceptIdle = 60 * time.Second
	DefaultInterceptMax  = 10 * time.Minute
)

// ErrRefused wraps every refused destination.
var ErrRefused = errors.New("destination refused")

// New makes a Proxy that follows the host's addresses until Close.
func New(cfg Config) (*Proxy, error) {
	d, err := NewDialer(DialerConfig{Admit: cfg.Admit, Resolver: cfg.Resolver, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	for _, n := range cfg.Admit {
		if cfg.Log != nil {
			cfg.Log.Warn("the egress proxy admits this network although it is not public", "network", n)
		}
	}
	p := &Proxy{cfg: cfg, d: d}
	p.transport = &http.Transport{DialContext: p.dial, Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}
	return p, nil
}

// Close stops following the host's addresses and closes idle forwarded
// connections.
func (p *Proxy) Close() {
	p.d.Close()
	p.transport.CloseIdleConnections()
}

func (p *Proxy) allowedName(host string) bool {
	if len(p.cfg.Hosts) == 0 {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range p.cfg.Hosts {
		if host == h || strings.HasSuffix(host, "."+h) {
			return true
		}
	}
	return false
}

// dial connects to hostport through p.d when the host is allowed; an
// address is judged by the address rules first, so the answer names the
// one that matters (an address is never a listed host).
func (p *Proxy) dial(ctx context.Context, _, hostport string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not host:port", ErrRefused, hostport)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := p.d.Check(a); err != nil {
			return nil, err
		}
	}
	if !p.allowedName(host) {
		return nil, fmt.Errorf("%w: %s is not among the allowed hosts", ErrRefused, host)
	}
	return p.d.DialContext(ctx, "tcp", hostport)
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		http.Error(w, "cocoonbox egress proxy: only absolute http:// requests and CONNECT", http.StatusBadRequest)
		return
	}
	if door, ok := p.cfg.Doors[strings.ToLower(r.URL.Host)]; ok {
		door.ServeHTTP(w, r)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Connection")
	out.Header.Del("Proxy-Authorization")
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var box netip.Addr
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		box = ap.Addr().Unmap()
	}
	inj := p.boxInjections(box, canonicalHost(r.Host))
	if to, ok := p.cfg.Resolve[canonicalHost(r.Host)]; ok && len(inj) > 0 {
		ctx = context.WithValue(ctx, resolveTo{}, to.Unmap())
	}
	up, err := p.dial(ctx, "tcp", r.Host)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel over this connection", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if len(inj) > 0 {
		// The hijacked connection outlives r: its context is done.
		p.intercept(context.WithoutCancel(ctx), bufConn{Conn: down, r: buf.Reader}, up, box, r.Host)
		return
	}
	// Bytes the client sent after its CONNECT line are already buffered.
	if n := buf.Reader.Buffered(); n > 0 {
		pending, _ := buf.Reader.Peek(n)
		if _, err := up.Write(pending); err != nil {
			up.Close()
			down.Close()
			return
		}
	}
	splice(down, up)
}

// splice copies both ways until both directions end.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
}

func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadGateway
	if errors.Is(err, ErrRefused) {
		status = http.StatusForbidden
	}
	if p.cfg.Log != nil {
		p.cfg.Log.Info("egress refused or failed", "client", r.RemoteAddr, "method", r.Method, "target", r.Host, "err", err)
	}
	http.Error(w, "cocoonbox egress proxy: "+err.Error(), status)
}
