package server

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
)

// DefaultConnsPerAddress is how many connections one client address may
// hold open at once without configuration (api.yaml
// http.max_conns_per_address). A client that multiplexes (HTTP/2, gRPC)
// needs one; a browser a few.
const DefaultConnsPerAddress = 256

// SetConnLimit lets each client address hold at most max connections
// open at once (0 is no limit); one more is closed as soon as it is
// accepted, before anything is read from it. Peers in exempt (the
// reverse proxy in front, api.yaml trusted_proxies, whose one address
// carries every client) are not counted. Call it before Serve.
func (s *Server) SetConnLimit(max int, exempt []netip.Prefix) {
	s.connsPerAddress, s.connsExempt = max, exempt
}

// capListener is a listener that refuses an address's connection past max.
type capListener struct {
	net.Listener
	max    int
	exempt []netip.Prefix
	log    *slog.Logger

	mu      sync.Mutex
	open    map[netip.Addr]int
	refused map[netip.Addr]bool // logged once while at the cap
}

func (s *Server) capped(ln net.Listener) net.Listener {
	if s.connsPerAddress <= 0 {
		return ln
	}
	return &capListener{Listener: ln, max: s.connsPerAddress, exempt: s.connsExempt, log: s.log,
		open: map[netip.Addr]int{}, refused: map[netip.Addr]bool{}}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
		if err != nil || l.isExempt(ap.Addr().Unmap()) {
			return c, nil // a unix socket's peer, or the proxy
		}
		addr := ap.Addr().Unmap()
		l.mu.Lock()
		if l.open[addr] >= l.max {
			first := !l.refused[addr]
			l.refused[addr] = true
			l.mu.Unlock()
			c.Close()
			if first {
				l.log.Warn("connections refused: this address holds the most it may", "address", addr.String(), "max", l.max)
			}
			continue
		}
		l.open[addr]++
		l.mu.Unlock()
		return &cappedConn{Conn: c, l: l, addr: addr}, nil
	}
}

func (l *capListener) isExempt(a netip.Addr) bool {
	for _, p := range l.exempt {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (l *capListener) release(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[a]--; l.open[a] <= 0 {
		delete(l.open, a)
		delete(l.refused, a)
	}
}

// cappedConn gives its address's place back when closed (once: the
// server may close a connection more than once).
type cappedConn struct {
	net.Conn
	l    *capListener
	addr netip.Addr
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
}
