//go:build booted

package local

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/wait"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// canConnect says whether the machine reaches ip:port over TCP (bash's
// /dev/tcp, within 3 s).
func canConnect(t *testing.T, id, ip string, port int) bool {
	t.Helper()
	return connectsWithin(t, id, ip, port, 3)
}

// reaches is canConnect for a connection that must open: a deadline far
// above the normal time (a loaded host's box starts bash slowly), which
// costs nothing when it opens.
func reaches(t *testing.T, id, ip string, port int) bool {
	t.Helper()
	return connectsWithin(t, id, ip, port, 60)
}

func connectsWithin(t *testing.T, id, ip string, port, seconds int) bool {
	t.Helper()
	_, code := shell(t, id, "bash", fmt.Sprintf("timeout %d bash -c 'exec 3<>/dev/tcp/%s/%d' 2>/dev/null", seconds, ip, port))
	return code == 0
}

// inNetNS runs fn on a thread that entered the machine's network
// namespace from the host, with every privilege of the test process (a
// box root with raw sockets, the strongest attacker). The thread stays
// locked and ends with its goroutine, so nothing else ever runs in the
// box's namespace; sockets fn opens stay in it wherever they are used.
func inNetNS[T any](id string, fn func() (T, error)) (T, error) {
	nsName, _, _ := linkNames(sup.cfg.Network.Bridge, id)
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(netnsPath(nsName), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err != nil {
			ch <- result{err: fmt.Errorf("enter %s: %w", nsName, err)}
			return
		}
		v, err := fn()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}

// listenIn listens on 0.0.0.0 (a free port) inside a machine's network
// namespace (inNetNS).
func listenIn(t *testing.T, id string) (net.Listener, int) {
	t.Helper()
	_, err := sup.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := inNetNS(id, func() (net.Listener, error) { return net.Listen("tcp", "0.0.0.0:0") })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go acceptAll(ln)
	return ln, ln.Addr().(*net.TCPAddr).Port
}

func acceptAll(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// Contract: Boxes (api) ↔ sandboxd; Must show: two boxes at once, each
// unable to reach the other's addresses, and neither able to reach a host
// listener on 0.0.0.0 that is not the proxy or a contract door.
func TestTwoBoxesAreIsolatedFromEachOtherAndFromHostListeners(t *testing.T) {
	t.Parallel()
	a, b := boot(t, v1), boot(t, v1)
	if a.Address == b.Address || a.Address == "" {
		t.Fatalf("addresses %q and %q", a.Address, b.Address)
	}
	_, bPort := listenIn(t, b.ID)
	host, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go acceptAll(host)
	hostPort := host.Addr().(*net.TCPAddr).Port
	gw := sup.cfg.Network.Gateway.Addr().String()

	// Controls: the listeners are up and reachable where they should be.
	if !reaches(t, b.ID, b.Address, bPort) {
		t.Fatalf("box B cannot reach its own listener on %s:%d: the check below proves nothing", b.Address, bPort)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(gw, fmt.Sprint(hostPort)), 60*time.Second); err != nil {
		t.Fatalf("the host listener is not on the gateway address: %v", err)
	} else {
		c.Close()
	}
	if !reaches(t, a.ID, gw, DefaultProxyPort) {
		t.Fatalf("box A cannot reach the egress proxy on %s:%d", gw, DefaultProxyPort)
	}

	if canConnect(t, a.ID, b.Address, bPort) {
		t.Errorf("box A reached box B's listener on %s:%d", b.Address, bPort)
	}
	for _, m := range []sandbox.Machine{a, b} {
		if canConnect(t, m.ID, gw, hostPort) {
			t.Errorf("box %s reached the host's listener on 0.0.0.0:%d through %s", m.ID, hostPort, gw)
		}
	}
	// Nor through the proxy: it refuses every address that is not public.
	out, _ := shell(t, a.ID, "bash", fmt.Sprintf(`exec 3<>/dev/tcp/%s/%d; printf 'CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n' >&3; head -1 <&3`,
		gw, DefaultProxyPort, hostPort, hostPort))
	if !strings.Contains(out, " 403 ") {
		t.Errorf("the proxy's answer to CONNECT 127.0.0.1:%d: %q, want 403", hostPort, out)
	}
}

// Issue 24, Must show: a box cannot reach any host address through the
// proxy (a CONNECT to the host's own address reached a service on
// 0.0.0.0). From a booted box, every address of every host interface, on
// the port of a host service listening on 0.0.0.0 and [::], is answered
// 403 and the service is never reached.
func TestABoxReachesNoHostAddressThroughTheProxy(t *testing.T) {
	t.Parallel()
	m := boot(t, v1)
	host, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	var reached atomic.Int64
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			c.Close()
		}
	}()
	port := host.Addr().(*net.TCPAddr).Port
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP)
		dest := net.JoinHostPort(ip.Unmap().String(), fmt.Sprint(port))
		fmt.Fprintf(&script, "exec 3<>/dev/tcp/%s/%d; printf 'CONNECT %s HTTP/1.1\\r\\nHost: %[3]s\\r\\n\\r\\n' >&3; echo \"%[3]s $(head -1 <&3)\"; exec 3<&-\n",
			sup.cfg.Network.Gateway.Addr(), DefaultProxyPort, dest)
	}
	out, _ := shell(t, m.ID, "bash", script.String())
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(addrs) {
		t.Fatalf("%d answers for the host's %d addresses:\n%s", len(lines), len(addrs), out)
	}
	for _, l := range lines {
		if !strings.Contains(l, " 403 ") {
			t.Errorf("CONNECT from the box to the host's address: %q, want 403", l)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the host service on 0.0.0.0:%d was reached %d times from the box", port, n)
	}
	t.Logf("%d host addresses refused", len(addrs))
}

// Must show (several desk boxes at once, each its own 127.0.0.1:PORT): the
// port relay reaches each box's own loopback listener.
func TestPortRelayReachesEachBoxsOwnLoopback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boxes := []sandbox.Machine{boot(t, v1), boot(t, v1)}
	for _, m := range boxes {
		mustSh(t, m.ID, fmt.Sprintf(`setsid -f systemd-socket-activate -l 127.0.0.1:7443 --inetd -a sh -c 'echo %s' >/dev/null 2>&1`, m.ID))
	}
	for _, m := range boxes {
		var got string
		wait.Eventually(t, 2*time.Minute, "the relay to "+m.ID+":7443", func() (bool, string) {
			c, err := sup.Dial(ctx, m.ID, 7443)
			if err != nil {
				return false, err.Error()
			}
			defer c.Close()
			line, err := bufio.NewReader(c).ReadString('\n')
			got = strings.TrimSpace(line)
			return err == nil, fmt.Sprintf("%q %v", line, err)
		})
		if got != m.ID {
			t.Errorf("relay to %s:7443 answered %q", m.ID, got)
		}
	}
	if _, err := sup.Dial(ctx, boxes[0].ID, 0); err == nil {
		t.Error("a relay to port 0 was accepted")
	}
}

// The egress proxy is the boxes' way out: apt works through it.
func TestAptWorksThroughTheEgressProxy(t *testing.T) {
	t.Parallel()
	m := boot(t, v1)
	out := mustSh(t, m.ID, `. /etc/profile.d/cocoonbox-egress.sh; echo "$HTTP_PROXY"; apt-get -o Acquire::Retries=2 update 2>&1 | tail -3`)
	if !strings.Contains(out, sup.ProxyURL()) || !strings.Contains(out, "Reading package lists") {
		t.Fatalf("apt-get update through the proxy:\n%s", out)
	}
	if strings.Contains(out, "Err:") || strings.Contains(out, "Failed") {
		t.Fatalf("apt-get update failed:\n%s", out)
	}
}

// Must show (several desk boxes at once, each its own 127.0.0.1:5900):
// two desk boxes run side by side, and the relay reaches each one's VNC.
func TestTwoDeskBoxesEachServeTheirOwnVNC(t *testing.T) {
	t.Parallel()
	if _, err := sup.imageRoot(desk); err != nil {
		t.Fatalf("the desk image: %v (set COCOONBOX_DESK_IMAGE; make box-test does)", err)
	}
	ctx := context.Background()
	boxes := []sandbox.Machine{boot(t, desk), boot(t, desk)}
	for _, m := range boxes {
		wait.Eventually(t, 60*time.Second, "VNC in "+m.ID, func() (bool, string) {
			c, err := sup.Dial(ctx, m.ID, 5900)
			if err != nil {
				return false, err.Error()
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			banner := make([]byte, 12)
			_, err = io.ReadFull(c, banner)
			return err == nil && string(banner) == "RFB 003.008\n", fmt.Sprintf("%q %v", banner, err)
		})
	}
}
