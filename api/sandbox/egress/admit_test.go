package egress

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// The demo's and CI's Debian mirror resolves to 203.0.113.80, a
// documentation address the proxy refuses since issue 24, so apt in a
// box got 403. An operator's admitted network lets it through: in a
// network namespace of the test's own, a "mirror" in a second namespace
// behind a veth at 203.0.113.10 is reached through the proxy with
// 203.0.113.0/26 admitted, while 203.0.113.200 (the same documentation
// range, not admitted) is still refused, and so is 203.0.113.5, an
// address of the proxy's own namespace inside the admitted network.
func TestProxyReachesAnAdmittedNetworkButNeverTheHost(t *testing.T) {
	if testenv.InOwnNetNS(t) {
		admitInNamespace(t)
	}
}

func admitInNamespace(t *testing.T) {
	lo, err := netlink.LinkByName("lo")
	must(t, err)
	must(t, netlink.LinkSetUp(lo))
	must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up0"}, PeerName: "up1"}))
	up0, err := netlink.LinkByName("up0")
	must(t, err)
	up1, err := netlink.LinkByName("up1")
	must(t, err)
	must(t, netlink.LinkSetUp(up0))
	addAddrs(t, up0, []string{"1.2.3.4/24", "203.0.113.5/32"})
	must(t, netlink.RouteAdd(&netlink.Route{LinkIndex: up0.Attrs().Index, Dst: ipnet("0.0.0.0/0"), Scope: netlink.SCOPE_UNIVERSE}))

	// The mirror's namespace: up1 with 203.0.113.10 and a route back.
	mirror, ln := mirrorNamespace(t, "203.0.113.10")
	must(t, netlink.LinkSetNsFd(up1, int(mirror)))
	h, err := netlink.NewHandleAt(mirror)
	must(t, err)
	defer h.Close()
	up1, err = h.LinkByName("up1")
	must(t, err)
	must(t, h.AddrAdd(up1, &netlink.Addr{IPNet: ipnet("203.0.113.10/24"), Flags: unix.IFA_F_NODAD}))
	must(t, h.LinkSetUp(up1))
	must(t, h.RouteAdd(&netlink.Route{LinkIndex: up1.Attrs().Index, Dst: ipnet("0.0.0.0/0"), Scope: netlink.SCOPE_UNIVERSE}))
	reached := make(chan struct{}, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			reached <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	p, proxy := newProxy(t, Config{Admit: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/26")}})
	wait.Eventually(t, time.Minute, "the proxy seeing 203.0.113.5 as the host's", func() (bool, string) {
		return p.d.host.Has(netip.MustParseAddr("203.0.113.5")), fmt.Sprint(*p.d.host.set.Load())
	})
	c, err := net.Dial("tcp", proxy)
	must(t, err)
	defer c.Close()
	mirrorAt := net.JoinHostPort("203.0.113.10", fmt.Sprint(port))
	if code, body := connect(t, c, mirrorAt); code != 200 {
		t.Fatalf("CONNECT %s (admitted): %d %q, want 200", mirrorAt, code, body)
	}
	wait.Eventually(t, time.Minute, "the tunnel reaching the mirror", func() (bool, string) {
		return len(reached) == 1, fmt.Sprint(len(reached))
	})
	connectAll(t, proxy, map[string]string{
		net.JoinHostPort("203.0.113.200", fmt.Sprint(port)): "is not a public address: documentation",
		net.JoinHostPort("203.0.113.5", fmt.Sprint(port)):   "is an address of this host",
		net.JoinHostPort("198.51.100.1", fmt.Sprint(port)):  "is not a public address",
	})
}

// mirrorNamespace makes a network namespace and listens on addr:0 in it
// (a socket stays in the namespace it was made in); the listener serves
// once addr is on an interface there.
func mirrorNamespace(t *testing.T, addr string) (netns.NsHandle, *net.TCPListener) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	must(t, err)
	defer orig.Close()
	ns, err := netns.New() // and enters it, on this thread only
	must(t, err)
	t.Cleanup(func() { ns.Close() })
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		// Bind before the address is up: IP_FREEBIND.
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1) })
		if err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(t.Context(), "tcp4", net.JoinHostPort(addr, "0"))
	must(t, netns.Set(orig))
	must(t, err)
	t.Cleanup(func() { ln.Close() })
	return ns, ln.(*net.TCPListener)
}
