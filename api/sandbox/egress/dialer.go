package egress

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// DialerConfig is a Dialer's settings.
type DialerConfig struct {
	// Admit are networks reached although not public (ParseAdmit's
	// rules); the host's own addresses stay refused.
	Admit []netip.Prefix
	// Resolver resolves host names (net.DefaultResolver when nil); every
	// address it answers is checked.
	Resolver *net.Resolver
	// Resolve sends a host name (lower-case, no trailing dot) to one
	// address instead of DNS, and admits that address for that name's
	// dials alone, as the proxy's egress.resolve does: a test's server on
	// loopback reached under a public name while every other name, and
	// the address itself as a URL's host, stays refused.
	Resolve map[string]netip.Addr
	// Timeout bounds a connect (30 s when 0).
	Timeout time.Duration
	// Log gets the warnings of following the host's addresses.
	Log *slog.Logger
	// TestAllowLoopback admits loopback addresses, before every other
	// rule: for a test's server on 127.0.0.1. Never set outside tests.
	TestAllowLoopback bool
}

// Dialer opens the host's outbound TCP connections on behalf of someone
// else (a box through the egress proxy; a client's metadata document or,
// later, Connect's fetches by the api): to public addresses only (Public,
// or inside DialerConfig.Admit) that are not the host's own (HostAddrs),
// so neither a box nor a URL a user gives reaches the host's services, on
// loopback or on its public address, nor a private network. Every
// address a name resolves to is checked (one refused refuses the name),
// and the address the socket connects to is checked again in the
// dialer's Control, before connect(2): a DNS answer that changed between
// the check and the dial (rebinding) gets no packet. Refusals wrap
// ErrRefused. Safe for concurrent use; Close stops following the host's
// addresses.
type Dialer struct {
	host     *HostAddrs
	admit    []netip.Prefix
	resolver *net.Resolver
	loopback bool                  // DialerConfig.TestAllowLoopback
	pins     map[string]netip.Addr // DialerConfig.Resolve
	raw      net.Dialer
	// admitOne is an address every check passes, set by this package's
	// tests only (an unlisted host's upstream on loopback, which a
	// tunnel must reach to show its bytes are untouched).
	admitOne netip.Addr
}

// NewDialer makes a Dialer following the host's addresses until Close.
// It fails when the host's addresses cannot be read (netlink) or an
// Admit network breaks ParseAdmit's rules.
func NewDialer(cfg DialerConfig) (*Dialer, error) {
	for _, n := range cfg.Admit {
		if err := checkAdmit(n); err != nil {
			return nil, fmt.Errorf("egress admit %s %w", n, err)
		}
	}
	host, err := WatchHostAddrs(cfg.Log)
	if err != nil {
		return nil, err
	}
	d := &Dialer{host: host, admit: cfg.Admit, resolver: cfg.Resolver, loopback: cfg.TestAllowLoopback, pins: cfg.Resolve}
	if d.resolver == nil {
		d.resolver = net.DefaultResolver
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	// Control runs on the socket before connect(2), with the address the
	// kernel is about to be given.
	d.raw = net.Dialer{Timeout: timeout, ControlContext: func(ctx context.Context, _, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: dial %q: not an address and port", ErrRefused, address)
		}
		if to, ok := ctx.Value(resolveTo{}).(netip.Addr); ok && to == ap.Addr().Unmap() {
			return nil
		}
		return d.Check(ap.Addr())
	}}
	return d, nil
}

// Close stops following the host's addresses.
func (d *Dialer) Close() { d.host.Close() }

// Check refuses (ErrRefused, saying why) an address that is not public
// nor admitted, or is one of the host's own.
func (d *Dialer) Check(a netip.Addr) error {
	if d.admitOne.IsValid() && a.Unmap() == d.admitOne || d.loopback && a.Unmap().IsLoopback() {
		return nil
	}
	if why := nonPublic(a); why != "" && !d.admitted(a) {
		return fmt.Errorf("%w: %s is not a public address: %s", ErrRefused, a, why)
	}
	if d.host.Has(a) {
		return fmt.Errorf("%w: %s is an address of this host", ErrRefused, a)
	}
	return nil
}

// admitted says whether a is inside one of DialerConfig.Admit.
func (d *Dialer) admitted(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, n := range d.admit {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// resolve checks host (an address or a name, no port) and answers the
// address to dial: the address itself, the one a resolveTo context
// value pins, or a name's first address when every one passes Check.
func (d *Dialer) resolve(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), d.Check(a)
	}
	if to, ok := ctx.Value(resolveTo{}).(netip.Addr); ok {
		return to, nil
	}
	addrs, err := d.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, a := range addrs {
		if err := d.Check(a); err != nil {
			return netip.Addr{}, fmt.Errorf("%s resolves to a refused address: %w", host, err)
		}
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("resolve %s: no address", host)
	}
	return addrs[0].Unmap(), nil
}

// DialContext connects to address (host:port, the host a name or an
// address) over TCP, whatever network says (an http.Transport's
// DialContext): refused addresses wrap ErrRefused.
func (d *Dialer) DialContext(ctx context.Context, _, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not host:port", ErrRefused, address)
	}
	if to, ok := d.pins[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		ctx = context.WithValue(ctx, resolveTo{}, to.Unmap())
	}
	a, err := d.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	return d.raw.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
}
