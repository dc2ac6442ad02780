// Package local is the embedded supervisor: it boots cbdesk machines under
// systemd-nspawn on this host, each with its own disk (the image below an
// overlayfs upper layer), cgroup and network namespace on the box bridge,
// and serves the egress proxy on the bridge's gateway.
//
// Contract: Boxes (api) ↔ sandboxd (package sandbox defines it). The api
// runs it in-process by default; cocoonbox-sandboxd serves it over the
// wire protocol.
//
// One Supervisor holds one bridge: New takes a lock on the bridge's name
// (waiting for another holder to let go), so a second supervisor on the
// same bridge waits instead of fighting over it, and clears whatever a
// crashed holder left behind (its boxes, mounts, namespaces, veths,
// cgroups) before it starts.
package local

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/egress"
	"golang.org/x/sys/unix"
)

// Config says where the supervisor keeps things.
type Config struct {
	// StateDir holds the machines' disks and the saves (default
	// /var/lib/cocoonbox-sandboxd).
	StateDir string
	// Images is the directory of image roots, each cbdesk-vN-TIER as
	// `make image` builds them (out/images).
	Images string
	// Network is the box network (DefaultNetwork when its Bridge is empty).
	Network Network
	// EgressHosts, when set, are the only hosts the egress proxy reaches
	// (see egress.Proxy.Hosts); empty allows every public host.
	EgressHosts []string
	// EgressResolve sends a host a box's key lists to an address instead
	// of DNS, admitted even when not public (tests and the demo: api.yaml
	// sandbox.local.egress.resolve; egress.Config.Resolve). Logged at
	// start as a warning.
	EgressResolve map[string]netip.Addr
	// EgressUpstreamCAFile, when set, is the PEM file of the only roots an
	// intercepted host's upstream is verified against (the system roots
	// otherwise; api.yaml sandbox.local.egress.upstream_ca_file).
	EgressUpstreamCAFile string
	// EgressAdmit are networks the egress proxy reaches although they are
	// not public (egress.Config.Admit; api.yaml
	// sandbox.local.egress.admit, cocoonbox-sandboxd --egress-admit).
	EgressAdmit []netip.Prefix
	// GWURL is gw's origin: the gw door on the gateway's port 18090
	// forwards the boxes' model calls there with their owner's key
	// (api/sandbox/gwdoor; api.yaml gw.url). Empty: no door.
	GWURL string
	// Doors are more of the gateway's services, by host:port, that the
	// caller serves on its own listener there (the api's Connect box
	// door on connect.box_listen, 10.203.0.1:18091): the egress proxy
	// answers a box's plain-HTTP request to one with its handler, with the
	// box's address as RemoteAddr (egress.Config.Doors), where it would
	// refuse the host's own address.
	Doors map[string]http.Handler
	// DefaultMaxClaims is a tenant's cap until SetTenantCap (default
	// sandbox.DefaultMaxClaims).
	DefaultMaxClaims int
	// BootTimeout bounds a boot (default 90 s).
	BootTimeout time.Duration
	// Spares is how many booted machines of each tier's newest image are
	// kept for Boot to take over (spares.go; 0, the default, keeps none;
	// at most MaxSpares). Each costs an idle box's memory.
	Spares int
	// Log gets the supervisor's events (slog.Default when nil).
	Log *slog.Logger
}

// MaxSpares bounds Config.Spares: more than a few only helps a burst of
// creates, and each is an idle box's memory.
const MaxSpares = 8

// Supervisor is the local sandbox.Supervisor.
type Supervisor struct {
	cfg     Config
	lock    *os.File // flock on the bridge's name
	runDir  string   // crash records of booted machines
	proxy   *http.Server
	gwDoor  *http.Server // nil without Config.GWURL
	caPEM   []byte       // the pool CA's certificate, which every box trusts
	events  *eventLog
	mu      sync.Mutex
	byID    map[string]*machine
	caps    map[string]int
	addrs   map[int]string // address offset → machine id
	closed  bool
	closing chan struct{}
	// spares are the booted spares by image ref (s.mu); spareKick wakes
	// keepSpares, which closes sparesDone when it ends.
	spares     map[string][]*spare
	spareKick  chan struct{}
	sparesDone chan struct{}
	// booting counts the machines booting themselves (s.mu): the pool
	// boots no spare while one does.
	booting int
	// spareBoot is the spare the pool is booting now, or nil (s.mu): a
	// machine that starts booting itself stops it (yieldSpare), a wake
	// freezes it (quiet) until quietUntil, when quietEnd fires (yield.go).
	spareBoot  *spareBoot
	quietUntil time.Time
	quietEnd   *time.Timer
	// spareRetryAt is when the pool may boot an image's spares again
	// after a failure (s.mu; backOff).
	spareRetryAt map[string]time.Time
	// spareWatch counts the spares' watchers, whose teardowns Close waits
	// for.
	spareWatch sync.WaitGroup
}

var _ sandbox.Supervisor = (*Supervisor)(nil)

// New starts a supervisor: it takes the bridge, clears a crashed
// holder's leftovers, brings up the bridge and the egress proxy, and loads
// the machines StateDir holds (all stopped). Close stops it. It fails
// with sandbox.ErrUnavailable when not root, naming Config.Images when
// that is unset, and with ctx's error when another holder keeps the bridge
// past ctx.
func New(ctx context.Context, cfg Config) (*Supervisor, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("the local supervisor needs root (systemd-nspawn, netlink, cgroups): %w", sandbox.ErrUnavailable)
	}
	if cfg.StateDir == "" {
		cfg.StateDir = "/var/lib/cocoonbox-sandboxd"
	}
	if cfg.Network.Bridge == "" {
		cfg.Network = DefaultNetwork()
	}
	if cfg.DefaultMaxClaims == 0 {
		cfg.DefaultMaxClaims = sandbox.DefaultMaxClaims
	}
	if cfg.BootTimeout == 0 {
		cfg.BootTimeout = 90 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Images == "" {
		return nil, errors.New("local supervisor: Config.Images (the directory of image roots) is not set")
	}
	if cfg.Spares < 0 || cfg.Spares > MaxSpares {
		return nil, fmt.Errorf("local supervisor: Config.Spares %d is not 0 to %d", cfg.Spares, MaxSpares)
	}
	s := &Supervisor{cfg: cfg, events: newEventLog(), byID: map[string]*machine{}, caps: map[string]int{},
		addrs: map[int]string{}, closing: make(chan struct{}),
		spares: map[string][]*spare{}, spareKick: make(chan struct{}, 1), sparesDone: make(chan struct{}),
		spareRetryAt: map[string]time.Time{}}
	s.runDir = filepath.Join("/run/cocoonbox-sandboxd", cfg.Network.Bridge)
	if err := os.MkdirAll(s.runDir, 0o700); err != nil {
		return nil, err
	}
	if err := s.takeBridge(ctx); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			s.lock.Close()
		}
	}()
	s.clearLeftovers()
	if err := s.clearSpareDisks(); err != nil {
		return nil, err
	}
	for _, d := range []string{"machines", "saves"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if err := s.loadMachines(); err != nil {
		return nil, err
	}
	if err := cfg.Network.ensureBridge(); err != nil {
		return nil, err
	}
	if err := s.serveProxy(); err != nil {
		return nil, err
	}
	ok = true
	if cfg.Spares > 0 {
		go s.keepSpares()
	} else {
		close(s.sparesDone)
	}
	return s, nil
}

// takeBridge waits for the flock on the bridge's name.
func (s *Supervisor) takeBridge(ctx context.Context) error {
	f, err := os.OpenFile(s.runDir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			s.lock = f
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("bridge %s is held by another supervisor (%s): %w", s.cfg.Network.Bridge, f.Name(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Supervisor) serveProxy() error {
	addr := net.JoinHostPort(s.cfg.Network.Gateway.Addr().String(), fmt.Sprint(DefaultProxyPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("egress proxy on %s: %w", addr, err)
	}
	ca, caPEM, err := loadCA(s.cfg.StateDir)
	if err != nil {
		ln.Close()
		return err
	}
	s.caPEM = caPEM
	cfg := egress.Config{Hosts: s.cfg.EgressHosts, Log: s.cfg.Log, CA: ca, Injections: s.injections, Resolve: s.cfg.EgressResolve, Admit: s.cfg.EgressAdmit,
		Doors: map[string]http.Handler{}}
	for addr, h := range s.cfg.Doors {
		cfg.Doors[strings.ToLower(addr)] = h
	}
	if s.cfg.GWURL != "" {
		door, err := s.serveGWDoor()
		if err != nil {
			ln.Close()
			return err
		}
		cfg.Doors[net.JoinHostPort(s.cfg.Network.Gateway.Addr().String(), fmt.Sprint(GWPort))] = door
	}
	if f := s.cfg.EgressUpstreamCAFile; f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			ln.Close()
			return fmt.Errorf("egress upstream CA file: %w", err)
		}
		cfg.UpstreamRoots = x509.NewCertPool()
		if !cfg.UpstreamRoots.AppendCertsFromPEM(data) {
			ln.Close()
			return fmt.Errorf("egress upstream CA file %s: no PEM certificate", f)
		}
		s.cfg.Log.Warn("the egress proxy verifies intercepted upstreams against this file only, not the system roots", "upstream_ca_file", f)
	}
	for host, a := range s.cfg.EgressResolve {
		s.cfg.Log.Warn("the egress proxy sends this host, for a box whose key lists it, to this address instead of DNS, even a non-public one", "host", host, "address", a)
	}
	p, err := egress.New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	s.proxy = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	s.proxy.RegisterOnShutdown(p.Close)
	go func() { _ = s.proxy.Serve(ln) }()
	return nil
}

// ProxyURL is the egress proxy as boxes name it, http://<gateway>:3128
// (http://10.203.0.1:3128 on DefaultNetwork).
func (s *Supervisor) ProxyURL() string {
	return fmt.Sprintf("http://%s:%d", s.cfg.Network.Gateway.Addr(), DefaultProxyPort)
}

// Close stops every booted machine (their disks stay), the proxy, and
// lets go of the bridge, removing it when no port is left on it.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	if b := s.spareBoot; b != nil {
		b.setFrozen(false) // its boot ends at closing, torn down as any boot's
	}
	if s.quietEnd != nil {
		s.quietEnd.Stop()
	}
	ms := make([]*machine, 0, len(s.byID))
	for _, m := range s.byID {
		ms = append(ms, m)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.op.Lock()
			defer m.op.Unlock()
			s.shutdown(m, "supervisor closed")
		}()
	}
	wg.Wait()
	<-s.sparesDone
	s.spareWatch.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.proxy.Shutdown(ctx)
	if s.gwDoor != nil {
		_ = s.gwDoor.Shutdown(ctx)
	}
	err := s.cfg.Network.removeBridge()
	s.lock.Close()
	return err
}

// Images implements sandbox.Supervisor.
func (s *Supervisor) Images(context.Context) ([]sandbox.Image, error) {
	return listImages(s.cfg.Images)
}

// SetTenantCap implements sandbox.Supervisor.
func (s *Supervisor) SetTenantCap(_ context.Context, tenant string, maxClaims int) error {
	if err := (sandbox.Spec{ID: "x", Tenant: tenant}).Check(); err != nil {
		return err
	}
	if maxClaims < 0 {
		return sandbox.Invalid("max_claims", "%d must be 0 or more", maxClaims)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caps[tenant] = maxClaims
	return nil
}

// claim reserves a machine id for a tenant under the cap.
func (s *Supervisor) claim(spec sandbox.Spec) (*machine, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("supervisor closed: %w", sandbox.ErrUnavailable)
	}
	if _, ok := s.byID[spec.ID]; ok {
		return nil, fmt.Errorf("machine %s: %w", spec.ID, sandbox.ErrExists)
	}
	limit, ok := s.caps[spec.Tenant]
	if !ok {
		limit = s.cfg.DefaultMaxClaims
	}
	held := 0
	for _, m := range s.byID {
		if m.Tenant == spec.Tenant {
			held++
		}
	}
	if held >= limit {
		return nil, fmt.Errorf("tenant %s holds %d machines, its max_claims is %d: %w", spec.Tenant, held, limit, sandbox.ErrCapExceeded)
	}
	m := &machine{record: record{ID: spec.ID, Tenant: spec.Tenant, Image: spec.Image, Created: time.Now().UTC()},
		state: sandbox.Stopped, dir: filepath.Join(s.cfg.StateDir, "machines", spec.ID)}
	m.op.Lock() // the creator holds it until the disk is there
	s.byID[spec.ID] = m
	return m, nil
}

// unclaim forgets a machine whose creation failed.
func (s *Supervisor) unclaim(m *machine) {
	s.mu.Lock()
	delete(s.byID, m.ID)
	s.mu.Unlock()
	m.op.Unlock()
}

// find returns a machine and holds its operation lock.
func (s *Supervisor) find(id string) (*machine, error) {
	if err := sandbox.CheckID("id", id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	m, ok := s.byID[id]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("machine %s: %w", id, sandbox.ErrNotFound)
	}
	m.op.Lock()
	s.mu.Lock()
	gone := s.byID[id] != m
	s.mu.Unlock()
	if gone {
		m.op.Unlock()
		return nil, fmt.Errorf("machine %s: %w", id, sandbox.ErrNotFound)
	}
	return m, nil
}

// Get implements sandbox.Supervisor.
func (s *Supervisor) Get(_ context.Context, id string) (sandbox.Machine, error) {
	if err := sandbox.CheckID("id", id); err != nil {
		return sandbox.Machine{}, err
	}
	s.mu.Lock()
	m, ok := s.byID[id]
	s.mu.Unlock()
	if !ok {
		return sandbox.Machine{}, fmt.Errorf("machine %s: %w", id, sandbox.ErrNotFound)
	}
	return m.view(), nil
}

// List implements sandbox.Supervisor.
func (s *Supervisor) List(_ context.Context, tenant string) ([]sandbox.Machine, error) {
	s.mu.Lock()
	ms := make([]*machine, 0, len(s.byID))
	for _, m := range s.byID {
		if tenant == "" || m.Tenant == tenant {
			ms = append(ms, m)
		}
	}
	s.mu.Unlock()
	out := make([]sandbox.Machine, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.view())
	}
	sortMachines(out)
	return out, nil
}

// Watch implements sandbox.Supervisor.
func (s *Supervisor) Watch(ctx context.Context, after uint64) (<-chan sandbox.Event, error) {
	return s.events.watch(ctx, after), nil
}

// setState records a machine's new state and tells the watchers.
func (s *Supervisor) setState(m *machine, st sandbox.State, detail string) {
	m.mu.Lock()
	m.state = st
	m.mu.Unlock()
	if detail != "" {
		s.cfg.Log.Info("machine state", "machine", m.ID, "tenant", m.Tenant, "state", st, "detail", detail)
	}
	s.events.add(sandbox.Event{Machine: m.ID, Tenant: m.Tenant, State: st, Time: time.Now().UTC(), Detail: detail})
}

// leaseAddress gives the machine the first free box address.
func (s *Supervisor) leaseAddress(id string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gw := s.cfg.Network.Gateway
	for off := 1; ; off++ {
		a, err := s.cfg.Network.addressAt(off)
		if err != nil {
			return 0, err
		}
		if a.Addr() == gw.Addr() || s.addrs[off] != "" {
			continue
		}
		s.addrs[off] = id
		return off, nil
	}
}

func (s *Supervisor) releaseAddress(off int) {
	s.mu.Lock()
	delete(s.addrs, off)
	s.mu.Unlock()
}
