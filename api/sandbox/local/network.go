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
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The box network (Contract: agent.env keys, Connect): one bridge on the
// host holding the gateway address (10.203.0.1), one network namespace per
// box with a veth whose box end is host0. Every box port on the bridge is
// isolated (no box-to-box frames), the host's neighbour entry of each box
// address is permanent, and the firewall (filter.go) lets a box reach only
// the gateway's allowed ports: the egress proxy and the contract's doors.
//
// The gateway's MAC never moves (gatewayMAC): a box learns it once.
//
// A box's port accepts only that box's own MAC and IP (issue 37, Deliver
// 4: the egress proxy knows a box by its source address, so a box root
// with raw sockets that moved another box's MAC to its own port held TCP
// connections from that box's address and was given its keys). Two
// layers, each holding without the other:
//
//   - The bridge itself (guardPort): the port is locked, learns nothing and
//     gets no flooded unknown unicast, and the box's MAC has a static,
//     sticky forwarding entry on it. So the MAC-to-port map is the
//     supervisor's alone: no frame moves it, a frame whose ether source is
//     not the box's MAC is dropped at the port, and what the host sends to
//     a box reaches that box's port only (a learned entry ages out after
//     5 minutes, and then the bridge flooded a box's traffic to every
//     port). Port flags live as long as the veth, whatever happens to the
//     host's nftables ruleset (a host firewall reload that flushes it).
//   - nftables, bridge family (filter.go, filterPort): a port's frames
//     must be IPv4 from the box's MAC and address, or ARP whose ether
//     source and sender are the box's MAC and address; anything else
//     (another address, IPv6, VLAN tags, other ether types) is dropped.
//     The bridge's flags check MACs only; without this, a box keeping its
//     own MAC could still send blind IPv4 from another box's address.
//
// Both go with the veth: its deletion takes its forwarding entries and
// flags, and unplug removes its nftables chain and map element (found by
// the veth's name, so a crashed run's leftovers are cleared by the next
// plug of the same name, clearLeftovers or clearSpareDisks); the whole
// bridge table goes at removeBridge.

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
	// Set even when it is already this MAC: setting marks it chosen, and
	// the kernel stops moving it.
	if err := netlink.LinkSetHardwareAddr(link, n.gatewayMAC()); err != nil {
		return fmt.Errorf("MAC address of bridge %s: %w", n.Bridge, err)
	}
	addr := &netlink.Addr{IPNet: prefixNet(n.Gateway)}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("address %s on %s: %w", n.Gateway, n.Bridge, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bridge %s up: %w", n.Bridge, err)
	}
	return n.installFirewall()
}

// gatewayMAC is the bridge's MAC address, derived from its name: the
// same on every start, locally administered, unicast. A bridge whose MAC
// nobody set takes its lowest port's, so without this the gateway's MAC
// moved whenever a box started or stopped, and every other box kept
// sending to the old one until its neighbour entry failed (tens of
// seconds; the kernel sends no gratuitous ARP for the change unless
// arp_notify is on). A box's TCP connect to the proxy timed out that way
// under load (issue 40).
func (n Network) gatewayMAC() net.HardwareAddr {
	sum := sha256.Sum256([]byte("cocoonbox gateway/" + n.Bridge))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&^1 | 2
	return mac
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
		n.unplug(bl)
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
		if err := guardPort(host); err != nil {
			return fmt.Errorf("bridge port %s: %w", vethName, err)
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
		// The box's MAC on its own port, static (never ages, never
		// learned) and sticky (never moves, were a port to learn).
		if err := netlink.NeighSet(&netlink.Neigh{LinkIndex: host.Attrs().Index, Family: unix.AF_BRIDGE,
			HardwareAddr: mac, Flags: netlink.NTF_MASTER | netlink.NTF_STICKY, State: netlink.NUD_NOARP}); err != nil {
			return fmt.Errorf("forwarding entry %s on %s: %w", mac, vethName, err)
		}
		if err := n.filterPort(vethName, mac, addr.Addr()); err != nil {
			return fmt.Errorf("filter port %s: %w", vethName, err)
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
// The veth's deletion takes its forwarding entries and port flags.
func (n Network) unplug(bl boxLink) {
	n.unfilterPort(bl.Veth)
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

// guardPort makes a box's bridge port isolated (no frames to or from
// the other box ports), locked (a frame whose ether source has no
// forwarding entry on this port is dropped, and no entry moves to it), not
// learning (the supervisor writes the port's one entry) and not flooded
// with unknown unicast (the host's frames to an address without an entry
// never reach every box). One RTM_SETLINK; vishvananda/netlink has a
// setter for each flag but the lock, so this is its request with the four
// attributes (iproute2: bridge link set dev VETH isolated on locked on
// learning off flood off).
func guardPort(port netlink.Link) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_BRIDGE)
	msg.Index = int32(port.Attrs().Index)
	req.AddData(msg)
	info := nl.NewRtAttr(unix.IFLA_PROTINFO|unix.NLA_F_NESTED, nil)
	info.AddRtAttr(nl.IFLA_BRPORT_ISOLATED, []byte{1})
	info.AddRtAttr(nl.IFLA_BRPORT_LOCKED, []byte{1})
	info.AddRtAttr(nl.IFLA_BRPORT_LEARNING, []byte{0})
	info.AddRtAttr(nl.IFLA_BRPORT_UNICAST_FLOOD, []byte{0})
	req.AddData(info)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// netnsSysctls are set in every box's network namespace when it is made:
// ping_group_range lets every group open ICMP datagram sockets, so ping
// needs no CAP_NET_RAW (systemd sets the same range on the host; a box's
// root in a user namespace has no raw sockets on the host-owned namespace).
var netnsSysctls = map[string]string{
	"net/ipv4/ping_group_range": "0 2147483647",
}

// newNamedNetNS makes /run/netns/NAME on a thread of its own, which is
// left locked so it ends with its goroutine: the thread sits in the new
// namespace, and no other goroutine may ever run on it. The thread sets
// netnsSysctls there (/proc/sys/net is the opening thread's namespace's).
func newNamedNetNS(name string) (netns.NsHandle, error) {
	type result struct {
		h   netns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.NewNamed(name)
		for key, value := range netnsSysctls {
			if err != nil {
				break
			}
			if err = os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
				h.Close()
				err = fmt.Errorf("sysctl %s: %w", key, err)
			}
		}
		ch <- result{h, err}
	}()
	r := <-ch
	return r.h, r.err
}
