//go:build booted

package local

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

// The gateway's MAC stays the same as boxes come and go, and after the
// bridge is made again. A bug named: the bridge took its lowest port's
// MAC, so a box stopping moved the gateway's MAC under every other box,
// which kept sending to the old one until its neighbour entry failed;
// TestABoxsKeyReachesItsHostOnlyThroughTheProxy's CONNECT to the proxy
// timed out that way under load, the box's entry for the gateway FAILED.
// No box boots here: the network alone, on its own bridge.
func TestTheGatewaysMACStaysAsBoxesComeAndGo(t *testing.T) {
	t.Parallel()
	n := Network{Bridge: "cbmac0", Gateway: netip.MustParsePrefix("10.219.0.1/16"), Ports: DefaultNetwork().Ports}
	if err := n.ensureBridge(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.removeBridge() })
	mac := func() string {
		t.Helper()
		l, err := netlink.LinkByName(n.Bridge)
		if err != nil {
			t.Fatal(err)
		}
		return l.Attrs().HardwareAddr.String()
	}
	want := mac()
	if want != n.gatewayMAC().String() {
		t.Fatalf("the bridge's MAC is %s, want %s", want, n.gatewayMAC())
	}
	var links []boxLink
	for i := 1; i <= 4; i++ {
		addr, err := n.addressAt(i + 1)
		if err != nil {
			t.Fatal(err)
		}
		bl, err := n.plug(fmt.Sprintf("mac%d", i), addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.unplug(bl) })
		links = append(links, bl)
		if got := mac(); got != want {
			t.Fatalf("box %d was plugged: the gateway's MAC moved from %s to %s", i, want, got)
		}
	}
	inBox := func(args ...string) (string, error) {
		out, err := exec.Command("ip", append([]string{"netns", "exec", links[0].NetNS}, args...)...).CombinedOutput()
		return string(out), err
	}
	gw := n.Gateway.Addr().String()
	// Nothing listens on the proxy's port of this bridge: the gateway
	// answers a connect with a reset, which it can only do once the box
	// has its MAC (no ping on a plain host).
	reach := func(when string) {
		t.Helper()
		out, _ := inBox("timeout", "10", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", gw, DefaultProxyPort))
		if !strings.Contains(out, "Connection refused") {
			t.Fatalf("box 1 connecting to the gateway %s: %q, want it refused by the gateway", when, out)
		}
	}
	reach("first")
	for i, bl := range links[1:] {
		n.unplug(bl)
		if got := mac(); got != want {
			t.Fatalf("box %d was unplugged: the gateway's MAC moved from %s to %s", i+2, want, got)
		}
	}
	if neigh, _ := inBox("ip", "neigh", "show", gw); !strings.Contains(neigh, want) {
		t.Errorf("box 1's neighbour entry for the gateway: %q, want %s", neigh, want)
	}
	reach("after the others left")
	n.unplug(links[0])
	if err := n.removeBridge(); err != nil {
		t.Fatal(err)
	}
	if err := n.ensureBridge(); err != nil {
		t.Fatal(err)
	}
	if got := mac(); got != want {
		t.Errorf("the bridge made again has MAC %s, want %s", got, want)
	}
}
