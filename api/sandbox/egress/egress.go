// Package egress is the supervisor's HTTP(S) egress proxy: the one way out
// of a box (HTTP_PROXY and HTTPS_PROXY in the box name it, on the box
// network's gateway). It forwards plain HTTP requests and tunnels CONNECT,
// and refuses any destination that is not a public address, so a box
// cannot reach the host's loopback, other boxes or a private network
// through it. It is where the claim env's host-only entries will be
// swapped for their placeholders (Contract: Key vault, Connect injection).
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Proxy is an http.Handler; serve it on the gateway. Its zero value
// reaches every public host. It answers a request that is neither an
// absolute http:// URL nor CONNECT with 400, a refused destination
// (ErrRefused: not Public, or outside Hosts) with 403, and a destination
// it cannot reach with 502, each with a text/plain line saying why.
type Proxy struct {
	// Hosts, when not empty, are the only destinations: a host name equal
	// to one or below it ("debian.org" allows "deb.debian.org").
	Hosts []string
	// Log gets one line per refused or failed request.
	Log *slog.Logger
	// Resolver resolves host names (net.DefaultResolver when nil).
	Resolver  *net.Resolver
	once      sync.Once
	transport *http.Transport // forwards plain HTTP; made on first use
}

// ErrRefused wraps every refused destination.
var ErrRefused = errors.New("destination refused")

// special are the ranges a box may never reach through the proxy, beyond
// what netip calls private, loopback, link-local, multicast or unspecified.
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
}

// Public says whether a box may reach addr: a global unicast address
// outside every private and special range.
func Public(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsGlobalUnicast() || addr.IsPrivate() || addr.IsLoopback() || addr.IsLinkLocalUnicast() {
		return false
	}
	for _, p := range special {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// resolve checks a host:port and returns the address to dial: the first
// public address of the host, checked here and dialled as such, so a
// name that resolves differently at dial time cannot slip past the check.
func (p *Proxy) resolve(ctx context.Context, hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not host:port", ErrRefused, hostport)
	}
	if !p.allowedName(host) {
		return "", fmt.Errorf("%w: %s is not among the allowed hosts", ErrRefused, host)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !Public(a) {
			return "", fmt.Errorf("%w: %s is not a public address", ErrRefused, a)
		}
		return net.JoinHostPort(a.String(), port), nil
	}
	r := p.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, a := range addrs {
		if !Public(a) {
			return "", fmt.Errorf("%w: %s resolves to %s, not a public address", ErrRefused, host, a)
		}
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("resolve %s: no address", host)
	}
	return net.JoinHostPort(addrs[0].Unmap().String(), port), nil
}

func (p *Proxy) allowedName(host string) bool {
	if len(p.Hosts) == 0 {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range p.Hosts {
		if host == h || strings.HasSuffix(host, "."+h) {
			return true
		}
	}
	return false
}

func (p *Proxy) dial(ctx context.Context, _, hostport string) (net.Conn, error) {
	addr, err := p.resolve(ctx, hostport)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 30 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
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
	p.once.Do(func() {
		p.transport = &http.Transport{DialContext: p.dial, Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}
	})
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
	up, err := p.dial(r.Context(), "tcp", r.Host)
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
	if p.Log != nil {
		p.Log.Info("egress refused or failed", "client", r.RemoteAddr, "method", r.Method, "target", r.Host, "err", err)
	}
	http.Error(w, "cocoonbox egress proxy: "+err.Error(), status)
}
