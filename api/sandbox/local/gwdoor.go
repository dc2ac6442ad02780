package local

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox/gwdoor"
)

// GWPort is the gateway's port of the gw door (the boxes' GW_BASE_URL,
// http://10.203.0.1:18090/v1; the firewall lets boxes reach it).
const GWPort = 18090

// gwEntry is the host-only claim env entry of the owner's gw key
// (api/usage's GWEntry).
const gwEntry = "CBGW"

// serveGWDoor serves the gw door on the gateway's GWPort, and answers it
// for the egress proxy's plain-HTTP requests to that address.
func (s *Supervisor) serveGWDoor() (*gwdoor.Door, error) {
	door, err := gwdoor.New(s.cfg.GWURL, s.gwKey, s.cfg.Log)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(s.cfg.Network.Gateway.Addr().String(), fmt.Sprint(GWPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("gw door on %s: %w", addr, err)
	}
	s.gwDoor = &http.Server{Handler: door, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = s.gwDoor.Serve(ln) }()
	return door, nil
}

// gwKey is the gw key of the box at a bridge address, from the machine's
// claims ("" for none).
func (s *Supervisor) gwKey(box netip.Addr) string {
	m := s.machineAt(box)
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.claims {
		if !e.Guest && e.Name == gwEntry {
			return e.Value
		}
	}
	return ""
}
