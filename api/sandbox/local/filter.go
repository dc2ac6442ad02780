package local

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The firewall: an nftables table of the supervisor's own (inet
// cocoonbox-BRIDGE), so nothing of the host's rules (Docker's among them)
// is touched or relied on. On input from the bridge it accepts only TCP to
// the gateway address on the allowed ports (the egress proxy, the
// contract's doors) and drops everything else, whatever listens on the
// host, on 0.0.0.0 or not; nothing is forwarded from or to the bridge, so
// no box packet is routed anywhere. Box-to-box frames never reach it: the
// bridge ports are isolated.

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
	for _, port := range n.Ports {
		exprs := append(append([]expr.Any{}, fromBridge...),
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: gw[:]},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
			&expr.Verdict{Kind: expr.VerdictAccept},
		)
		c.AddRule(&nftables.Rule{Table: table, Chain: input, Exprs: exprs})
	}
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
	return nil
}

// removeFirewall deletes the supervisor's table.
func (n Network) removeFirewall() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: n.tableName()})
	return c.Flush()
}
