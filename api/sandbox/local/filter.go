package local

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The firewall: nftables tables of the supervisor's own (inet and bridge
// cocoonbox-BRIDGE), so nothing of the host's rules (Docker's among them)
// is touched or relied on. On input from the bridge the inet table accepts
// only TCP to the gateway address on the allowed ports (the egress proxy,
// the contract's doors) and ICMP echo requests to the gateway address,
// and drops everything else, whatever listens on the host, on 0.0.0.0 or
// not; nothing is forwarded from or to the bridge, so no box packet is
// routed anywhere. Box-to-box frames never reach it: the bridge ports are
// isolated.
//
// The echo is let in for ping (issue 37, Deliver 4): the host's kernel
// answers it itself, no service behind it, to the asking box alone (its
// source address can only be its own: the bridge table below), and it
// tells the box only what it knows already, that its gateway is up; a box
// flooding it costs the host what a flood of SYNs to the proxy's port
// costs.
//
// The bridge table (network.go says why) holds the ports' own rules, in
// front of the bridge's forwarding: a frame from a box port jumps,
// through the map "ports" keyed by the port's name, to that port's chain
// (filterPort), which accepts IPv4 from the box's MAC and address and ARP
// whose ether source and sender are the box's, and drops the rest. The
// map is the only way in, so frames of other bridges (Docker's, another
// supervisor's) are left alone; this kernel has no `meta ibrname`
// (nft_meta_bridge) to name the bridge instead. A box port the map lacks
// would be filtered by its bridge flags alone, so plug brings a veth up
// only once its chain is in the map, and a failure there fails the plug.

func (n Network) tableName() string { return "cocoonbox-" + n.Bridge }

// ifname is an interface name as nftables compares it (NUL-padded to
// IFNAMSIZ).
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// installFirewall replaces the supervisor's table with a fresh one.
func (n Network) installFirewall() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyINet, Name: n.tableName()}
	// Delete a leftover first (its absence makes the whole batch fail, so
	// that is its own batch).
	c.DelTable(table)
	_ = c.Flush()
	c.AddTable(table)
	accept := nftables.ChainPolicyAccept
	// Before the filter priority, so the host's own accept rules cannot
	// open a door first.
	prio := nftables.ChainPriorityRef(-10)
	input := c.AddChain(&nftables.Chain{Name: "input", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: prio, Policy: &accept})
	forward := c.AddChain(&nftables.Chain{Name: "forward", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: prio, Policy: &accept})
	fromBridge := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(n.Bridge)},
	}
	gw := n.Gateway.Addr().As4()
	// toGateway matches IPv4 from the bridge to the gateway address whose
	// transport header has want at offset.
	toGateway := func(proto byte, offset uint32, want []byte) []expr.Any {
		return append(append([]expr.Any{}, fromBridge...),
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: gw[:]},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: offset, Len: uint32(len(want))},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: want},
			&expr.Verdict{Kind: expr.VerdictAccept},
		)
	}
	for _, port := range n.Ports {
		// TCP's destination port.
		c.AddRule(&nftables.Rule{Table: table, Chain: input, Exprs: toGateway(unix.IPPROTO_TCP, 2, binary.BigEndian.AppendUint16(nil, port))})
	}
	// ICMP's type.
	c.AddRule(&nftables.Rule{Table: table, Chain: input, Exprs: toGateway(unix.IPPROTO_ICMP, 0, []byte{icmpEchoRequest})})
	drop := &expr.Verdict{Kind: expr.VerdictDrop}
	c.AddRule(&nftables.Rule{Table: table, Chain: input, Exprs: append(append([]expr.Any{}, fromBridge...), drop)})
	c.AddRule(&nftables.Rule{Table: table, Chain: forward, Exprs: append(append([]expr.Any{}, fromBridge...), drop)})
	c.AddRule(&nftables.Rule{Table: table, Chain: forward, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(n.Bridge)},
		drop,
	}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables table %s: %w", n.tableName(), err)
	}
	return n.installPortFilter(c)
}

// icmpEchoRequest is ICMP's echo request type (RFC 792).
const icmpEchoRequest = 8

// bridgeTable is the supervisor's bridge-family table; portsMap its map
// of a port's name to the jump to its chain, portChain that chain's name.
func (n Network) bridgeTable() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyBridge, Name: n.tableName()}
}

func (n Network) portsMap() *nftables.Set {
	return &nftables.Set{Table: n.bridgeTable(), Name: "ports", KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict, IsMap: true}
}

func portChain(veth string) string { return "port-" + veth }

// installPortFilter replaces the bridge table with one whose map holds
// no port yet: a crashed run's ports go with the old table.
func (n Network) installPortFilter(c *nftables.Conn) error {
	table := n.bridgeTable()
	c.DelTable(table)
	_ = c.Flush() // its absence fails the batch: a batch of its own
	c.AddTable(table)
	accept := nftables.ChainPolicyAccept
	// The bridge family's filter priority; a drop here is final whatever
	// the host's own chains accept.
	chain := c.AddChain(&nftables.Chain{Name: "prerouting", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(-200), Policy: &accept})
	ports := n.portsMap()
	if err := c.AddSet(ports, nil); err != nil {
		return err
	}
	c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: ports.Name, SetID: ports.ID, IsDestRegSet: true, DestRegister: 0},
	}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables bridge table %s: %w", n.tableName(), err)
	}
	return nil
}

// filterPort gives the box port veth its chain, which accepts IPv4 whose
// ether source is mac and whose source is addr, and ARP for IPv4 over
// Ethernet whose ether source and sender are mac and addr, and drops every
// other frame, and puts the port in the map, in one batch.
func (n Network) filterPort(veth string, mac net.HardwareAddr, addr netip.Addr) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	table := n.bridgeTable()
	chain := c.AddChain(&nftables.Chain{Name: portChain(veth), Table: table})
	ip := addr.As4()
	fromBox := func(etherType uint16) []expr.Any {
		return []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: mac},
			// The ether type as sent: a VLAN tag reads 0x8100 here.
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 12, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, etherType)},
		}
	}
	accept := &expr.Verdict{Kind: expr.VerdictAccept}
	c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: append(fromBox(unix.ETH_P_IP),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip[:]},
		accept,
	)})
	c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: append(fromBox(unix.ETH_P_ARP),
		// hardware Ethernet, protocol IPv4, their lengths 6 and 4: the
		// sender's fields are where the next two loads read them.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 0, Len: 6},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 1, 0x08, 0x00, 6, 4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 6},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: mac},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 14, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip[:]},
		accept,
	)})
	c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}}})
	if err := c.SetAddElements(n.portsMap(), []nftables.SetElement{{Key: ifname(veth),
		VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: portChain(veth)}}}); err != nil {
		return err
	}
	return c.Flush()
}

// unfilterPort takes veth out of the map and deletes its chain; either
// may be missing (a crashed run's leftover, or no table at all), so each
// is a batch of its own and neither's failure is an error.
func (n Network) unfilterPort(veth string) {
	c, err := nftables.New()
	if err != nil {
		return
	}
	if c.SetDeleteElements(n.portsMap(), []nftables.SetElement{{Key: ifname(veth)}}) == nil {
		_ = c.Flush()
	}
	c.DelChain(&nftables.Chain{Name: portChain(veth), Table: n.bridgeTable()})
	_ = c.Flush()
}

// removeFirewall deletes the supervisor's tables.
func (n Network) removeFirewall() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: n.tableName()})
	c.DelTable(n.bridgeTable())
	return c.Flush()
}
