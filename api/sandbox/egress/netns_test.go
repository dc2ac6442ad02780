package egress

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// Issue 24, Deliver 5: the proxy refuses every address of the host, read
// at start and on change, and every non-public range, before any packet
// leaves. The test runs itself again in a network namespace of its own
// (nothing it sends can leave it): there an interface carries public
// addresses, as a host's uplink does, and a default route through it
// would carry a SYN to any address; a service listens on 0.0.0.0 and
// [::]. Each address of each interface, one added after the proxy
// started, and the documentation and site-local ranges are asked for:
// each is refused with 403, and the namespace's TCP ActiveOpens counter
// (every connect(2) that sent a SYN) does not move.
func TestProxyRefusesEveryHostAddressBeforeAnyPacket(t *testing.T) {
	if testenv.InOwnNetNS(t) {
		refuseInNamespace(t)
	}
}

// uplink are the namespace's "public" addresses; late is added once the
// proxy runs.
var (
	uplink = []string{"1.2.3.4/24", "2a00:1234::4/64"}
	late   = []string{"5.6.7.8/32", "2a00:5678::8/128"}
)

func refuseInNamespace(t *testing.T) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	must(t, netlink.LinkSetUp(lo))
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up0"}, PeerName: "up1"}
	must(t, netlink.LinkAdd(veth))
	up0, err := netlink.LinkByName("up0")
	must(t, err)
	up1, err := netlink.LinkByName("up1")
	must(t, err)
	must(t, netlink.LinkSetUp(up0))
	must(t, netlink.LinkSetUp(up1))
	addAddrs(t, up0, uplink)
	for _, dst := range []string{"0.0.0.0/0", "::/0"} {
		must(t, netlink.RouteAdd(&netlink.Route{LinkIndex: up0.Attrs().Index, Dst: ipnet(dst), Scope: netlink.SCOPE_UNIVERSE}))
	}
	port, reached := listen(t)
	p, proxy := newProxy(t, Config{})
	addAddrs(t, up0, late)
	for _, a := range late {
		addr := netip.MustParsePrefix(a).Addr()
		wait.Eventually(t, time.Minute, "the proxy seeing "+addr.String()+" added", func() (bool, string) {
			return p.d.host.Has(addr), fmt.Sprint(*p.d.host.set.Load())
		})
	}

	want := map[string]string{}
	all, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	must(t, err)
	for _, a := range all {
		// A link-local one goes without its zone: net/http takes no % in
		// the CONNECT target.
		ip, _ := netip.AddrFromSlice(a.IP)
		why := "is an address of this host"
		if !Public(ip) {
			why = "is not a public address"
		}
		want[net.JoinHostPort(ip.String(), strconv.Itoa(port))] = why
	}
	for _, a := range append(append([]string{}, uplink...), late...) {
		if _, ok := want[net.JoinHostPort(netip.MustParsePrefix(a).Addr().String(), strconv.Itoa(port))]; !ok {
			t.Fatalf("the namespace's addresses %v lack %s", want, a)
		}
	}
	for _, a := range []string{"192.0.2.1", "198.51.100.1", "203.0.113.1", "2001:db8::1", "fec0::1", "3fff::1"} {
		want[net.JoinHostPort(a, "443")] = "is not a public address"
	}

	// The control: a connect to a namespace address moves the counter and
	// reaches the service, so both can see a proxy that dials.
	before := activeOpens(t)
	c, err := net.Dial("tcp", net.JoinHostPort("1.2.3.4", strconv.Itoa(port)))
	must(t, err)
	c.Close()
	if activeOpens(t) != before+1 {
		t.Fatalf("a direct connect did not move ActiveOpens from %d", before)
	}
	wait.Eventually(t, time.Minute, "the direct connect reaching the service", func() (bool, string) {
		return reached() == 1, fmt.Sprint(reached())
	})

	conns := map[string]net.Conn{}
	for dest := range want {
		c, err := net.Dial("tcp", proxy)
		must(t, err)
		defer c.Close()
		conns[dest] = c
	}
	before = activeOpens(t)
	for dest, c := range conns {
		if code, body := connect(t, c, dest); code != 403 || !strings.Contains(body, want[dest]) {
			t.Errorf("CONNECT %s: %d %q, want 403 saying %q", dest, code, body, want[dest])
		}
	}
	if after := activeOpens(t); after != before {
		t.Errorf("the proxy opened %d TCP connections for refused destinations", after-before)
	}
	if n := reached(); n != 1 {
		t.Errorf("the proxy reached the service on 0.0.0.0 %d times", n-1)
	}
}

func addAddrs(t *testing.T, link netlink.Link, addrs []string) {
	t.Helper()
	for _, a := range addrs {
		// No duplicate address detection: a tentative IPv6 address cannot
		// be connected to for a second or more.
		must(t, netlink.AddrAdd(link, &netlink.Addr{IPNet: ipnet(a), Flags: unix.IFA_F_NODAD}))
	}
}

func ipnet(s string) *net.IPNet {
	pfx := netip.MustParsePrefix(s)
	return &net.IPNet{IP: pfx.Addr().AsSlice(), Mask: net.CIDRMask(pfx.Bits(), pfx.Addr().BitLen())}
}

// activeOpens is the namespace's TCP ActiveOpens (RFC 1213 tcpActiveOpens:
// connections that went to SYN-SENT, IPv4 and IPv6 together).
func activeOpens(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/net/snmp")
	must(t, err)
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = fields
			continue
		}
		for i, n := range names {
			if n == "ActiveOpens" {
				v, err := strconv.Atoi(fields[i])
				must(t, err)
				return v
			}
		}
	}
	t.Fatal("no Tcp: ActiveOpens in /proc/net/snmp")
	return 0
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
