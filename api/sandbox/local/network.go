package local

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The box network (Contract: agent.env keys, Connect): one bridge on the
// host holding the gateway address (10.203.0.1), one network namespace per
// box with a veth whose box end is host0. Every box port on the bridge is
// isolated (no box-to-box frames), the host's neighbour entry of each box
// address is permanent, and the firewall (filter.go) lets a box reach only
// the gateway's allowed ports: the egress proxy and the contract's doors.

// Network says where the boxes' network is.
type Network struct {
	// Bridge is the host bridge's name (default cocoonbox0).
	Bridge string
	// Gateway is the bridge's address and the boxes' prefix (default
	// 10.203.0.1/16); boxes get the addresses after it.
	Gateway netip.Prefix
	// Ports are the gateway's TCP ports a box may reach: the egress proxy's
	// and the doors (default 3128, 18090 gw, 18091 Connect).
	Ports []uint16
}

// DefaultNetwork is the contract's box network.
func DefaultNetwork() Network {
	return Network{
		Bridge:  "cocoonbox0",
		Gateway: netip.MustParsePrefix("10.203.0.1/16"),
		Ports:   []uint16{DefaultProxyPort, 18090, 18091},
	}
}

// DefaultProxyPort is the egress proxy's port on the gateway.
const DefaultProxyPort = 3128

// boxLink names one box's network pieces, all derived from its id so a
// crashed supervisor's leftovers are found again by name.
type boxLink struct {
	NetNS string // name under /run/netns
	Veth  string // host end, on the bridge
	Addr  netip.Prefix
}

// linkNames derives a box's namespace and veth names from the bridge and
// the machine id.
func linkNames(bridge, id string) (netnsName, veth, peer string) {
	sum := sha256.Sum256([]byte(bridge + "/" + id))
	h := hex.EncodeToString(sum[:5])
	// IFNAMSIZ allows 15 bytes: "cbv" + 10 hex.
	return bridge + "-" + id, "cbv" + h, "cbp" + h
}

func netnsPath(name string) string { return filepath.Join("/run/netns", name) }

// ensureBridge makes the bridge with the gateway address, up, IPv6 off.
func (n Network) ensureBridge() error {
	link, err := netlink.LinkByName(n.Bridge)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: n.Bridge}}
		if err := netlink.LinkAdd(br); err != nil {
			return fmt.Errorf("add bridge %s: %w", n.Bridge, err)
		}
		link, err = netlink.LinkByName(n.Bridge)
	}
	if err != nil {
		return fmt.Errorf("bridge %s: %w", n.Bridge, err)
	}
	if _, ok := link.(*netlink.Bridge); !ok {
		return fmt.Errorf("%s is a %s, not a bridge", n.Bridge, link.Type())
	}
	disableIPv6(n.Bridge)
	addr := &netlink.Addr{IPNet: prefixNet(n.Gateway)}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("address %s on %s: %w", n.Gateway, n.Bridge, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bridge %s up: %w", n.Bridge, err)
	}
	return n.installFirewall()
}

// removeBridge deletes the firewall, and the bridge once no port is left
// on it.
func (n Network) removeBridge() error {
	if err := n.removeFirewall(); err != nil {
		return fmt.Errorf("remove nftables table %s: %w", n.tableName(), err)
	}
	link, err := netlink.LinkByName(n.Bridge)
	if err != nil {
		return nil
	}
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	for _, l := range links {
		if l.Attrs().MasterIndex == link.Attrs().Index {
			return nil
		}
	}
	return netlink.LinkDel(link)
}

func disableIPv6(ifname string) {
	// Best effort: a host without IPv6 has no such file, and then no IPv6.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+ifname+"/disable_ipv6", []byte("1"), 0o644)
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// addressAt is the box address offset hosts after the network's start
// (offset 1 is the gateway in the default network).
func (n Network) addressAt(offset int) (netip.Prefix, error) {
	base := n.Gateway.Masked().Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	size := uint32(1) << (32 - n.Gateway.Bits())
	if offset < 1 || uint32(offset) >= size-1 {
		return netip.Prefix{}, fmt.Errorf("box network %s is full", n.Gateway.Masked())
	}
	v += uint32(offset)
	a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	return netip.PrefixFrom(a, n.Gateway.Bits()), nil
}

// plug makes the box's namespace and veth and filters its port.
func (n Network) plug(id string, addr netip.Prefix) (boxLink, error) {
	nsName, vethName, peerName := linkNames(n.Bridge, id)
	bl := boxLink{NetNS: nsName, Veth: vethName, Addr: addr}
	n.unplug(bl) // a crashed run's leftovers of the same name
	br, err := netlink.LinkByName(n.Bridge)
	if err != nil {
		return bl, fmt.Errorf("bridge %s: %w", n.Bridge, err)
	}
	ns, err := newNamedNetNS(nsName)
	if err != nil {
		return bl, fmt.Errorf("network namespace %s: %w", nsName, err)
	}
	defer ns.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: vethName, MasterIndex: br.Attrs().Index}, PeerName: peerName}
	if err := netlink.LinkAdd(veth); err != nil {
		n.unplug(bl)
		return bl, fmt.Errorf("add veth %s: %w", vethName, err)
	}
	err = func() error {
		host, err := netlink.LinkByName(vethName)
		if err != nil {
			return err
		}
		disableIPv6(vethName)
		if err := netlink.LinkSetIsolated(host, true); err != nil {
			return fmt.Errorf("isolate %s: %w", vethName, err)
		}
		peer, err := netlink.LinkByName(peerName)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetNsFd(peer, int(ns)); err != nil {
			return fmt.Errorf("move %s into %s: %w", peerName, nsName, err)
		}
		mac, err := n.configureInside(ns, peerName, addr)
		if err != nil {
			return err
		}
		// A permanent neighbour entry: ARP from one box claiming another's
		// address cannot steer the host's replies to it.
		if err := netlink.NeighSet(&netlink.Neigh{LinkIndex: br.Attrs().Index, IP: addr.Addr().AsSlice(),
			HardwareAddr: mac, State: netlink.NUD_PERMANENT, Family: unix.AF_INET}); err != nil {
			return fmt.Errorf("neighbour %s: %w", addr.Addr(), err)
		}
		return netlink.LinkSetUp(host)
	}()
	if err != nil {
		n.unplug(bl)
		return bl, fmt.Errorf("box %s network: %w", id, err)
	}
	return bl, nil
}

// configureInside names the box end host0, gives it the address and a
// default route through the gateway, and brings it and lo up.
func (n Network) configureInside(ns netns.NsHandle, peerName string, addr netip.Prefix) (net.HardwareAddr, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	peer, err := h.LinkByName(peerName)
	if err != nil {
		return nil, err
	}
	if err := h.LinkSetName(peer, "host0"); err != nil {
		return nil, fmt.Errorf("rename to host0: %w", err)
	}
	if err := h.AddrAdd(peer, &netlink.Addr{IPNet: prefixNet(addr)}); err != nil {
		return nil, fmt.Errorf("address %s: %w", addr, err)
	}
	if err := h.LinkSetUp(peer); err != nil {
		return nil, err
	}
	if lo, err := h.LinkByName("lo"); err == nil {
		if err := h.LinkSetUp(lo); err != nil {
			return nil, err
		}
	}
	route := &netlink.Route{LinkIndex: peer.Attrs().Index, Gw: n.Gateway.Addr().AsSlice()}
	if err := h.RouteAdd(route); err != nil {
		return nil, fmt.Errorf("default route via %s: %w", n.Gateway.Addr(), err)
	}
	return peer.Attrs().HardwareAddr, nil
}

// unplug removes what plug made; every step tolerates a missing piece.
func (n Network) unplug(bl boxLink) {
	if br, err := netlink.LinkByName(n.Bridge); err == nil && bl.Addr.IsValid() {
		_ = netlink.NeighDel(&netlink.Neigh{LinkIndex: br.Attrs().Index, IP: bl.Addr.Addr().AsSlice(), Family: unix.AF_INET})
	}
	if l, err := netlink.LinkByName(bl.Veth); err == nil {
		_ = netlink.LinkDel(l)
	}
	p := netnsPath(bl.NetNS)
	if _, err := os.Stat(p); err == nil {
		_ = unix.Unmount(p, unix.MNT_DETACH)
		_ = os.Remove(p)
	}
}

// newNamedNetNS makes /run/netns/NAME on a thread of its own, which is
// left locked so it ends with its goroutine: the thread sits in the new
// namespace, and no other goroutine may ever run on it.
func newNamedNetNS(name string) (netns.NsHandle, error) {
	type result struct {
		h   netns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.NewNamed(name)
		ch <- result{h, err}
	}()
	r := <-ch
	return r.h, r.err
}
