package lab

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// nftConn opens an nftables netlink connection inside a namespace.
func nftConn(ns string, opts ...nftables.ConnOption) (*nftables.Conn, func(), error) {
	if ns == "" {
		c, err := nftables.New(opts...)
		return c, func() {}, err
	}
	f, err := os.Open(netns.Path(ns))
	if err != nil {
		return nil, nil, fmt.Errorf("open netns %q: %w", ns, err)
	}
	c, err := nftables.New(append(opts, nftables.WithNetNSFd(int(f.Fd())))...)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return c, func() { f.Close() }, nil
}

// applyNft installs the conntrack, notrack and services knobs as one
// nftables table "cnb-<id>" (family ip) per namespace on the path, each
// namespace in one atomic netlink batch.
func (b *builder) applyNft(context.Context) error {
	table := nameOfTable(b.l.ID)
	server, client := b.lo.endpoints()
	// Where the stateful rule and notrack go: the nodes when they route pod
	// traffic, otherwise the receiving (server) pod.
	routed := b.s.row().routed == yes
	var pathNS []string
	hook := nftables.ChainHookInput
	if routed {
		pathNS, hook = b.lo.nodeNS, nftables.ChainHookForward
	} else {
		pathNS = []string{server.netns}
	}
	type nsRules struct {
		ct, notrack bool
		svc         bool
	}
	want := map[string]*nsRules{}
	get := func(ns string) *nsRules {
		if want[ns] == nil {
			want[ns] = &nsRules{}
		}
		return want[ns]
	}
	for _, ns := range pathNS {
		if b.s.Conntrack {
			get(ns).ct = true
		}
		if len(b.s.Notrack) > 0 {
			get(ns).notrack = true
		}
	}
	svcNS, svcHook := client.netns, nftables.ChainHookOutput
	if routed {
		svcNS, svcHook = b.lo.nodeNS[0], nftables.ChainHookPrerouting
	}
	if b.s.Services > 0 && b.s.Proxy == "" {
		get(svcNS).svc = true
	}
	for ns, r := range want {
		c, done, err := nftConn(ns)
		if err != nil {
			return err
		}
		t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: table})
		if r.notrack {
			for _, h := range []*nftables.ChainHook{nftables.ChainHookPrerouting, nftables.ChainHookOutput} {
				ch := c.AddChain(&nftables.Chain{Name: "notrack-" + hookName(h), Table: t, Type: nftables.ChainTypeFilter,
					Hooknum: h, Priority: nftables.ChainPriorityRaw})
				for _, n := range b.s.Notrack {
					// ip daddr CIDR notrack
					c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(matchDaddr(n), &expr.Counter{}, &expr.Notrack{})})
				}
			}
		}
		if r.ct {
			pol := nftables.ChainPolicyAccept
			ch := c.AddChain(&nftables.Chain{Name: "conntrack", Table: t, Type: nftables.ChainTypeFilter,
				Hooknum: hook, Priority: nftables.ChainPriorityFilter, Policy: &pol})
			// ct state established,related counter accept; ct state new counter accept
			for _, bits := range []uint32{expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED, expr.CtStateBitNEW} {
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
					&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
					&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: le32(bits), Xor: le32(0)},
					&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: le32(0)},
					&expr.Counter{},
					&expr.Verdict{Kind: expr.VerdictAccept},
				}})
			}
		}
		if r.svc {
			ch := c.AddChain(&nftables.Chain{Name: "services", Table: t, Type: nftables.ChainTypeNAT,
				Hooknum: svcHook, Priority: nftables.ChainPriorityNATDest})
			// A linear list, as iptables-mode kube-proxy evaluates it; the
			// server's VIP is last, so every packet walks all N rules.
			for i := 0; i < b.s.Services; i++ {
				backend := net.IPv4(10, 244, 255, byte(1+i%250)).To4()
				if i == b.s.Services-1 {
					backend = server.ip
				}
				vip := &net.IPNet{IP: serviceVIP(i), Mask: net.CIDRMask(32, 32)}
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(matchDaddr(vip),
					&expr.Immediate{Register: 1, Data: backend},
					&expr.NAT{Type: expr.NATTypeDestNAT, Family: uint32(nftables.TableFamilyIPv4), RegAddrMin: 1},
				)})
			}
		}
		err = c.Flush()
		done()
		if err != nil {
			return fmt.Errorf("nftables table %s in %s: %w", table, nsLabel(ns), err)
		}
	}
	return nil
}

func nameOfTable(id string) string { return "cnb-" + id }

func hookName(h *nftables.ChainHook) string {
	switch *h {
	case *nftables.ChainHookPrerouting:
		return "pre"
	case *nftables.ChainHookOutput:
		return "out"
	}
	return "x"
}

// matchDaddr is `ip daddr CIDR`.
func matchDaddr(n *net.IPNet) []expr.Any {
	ip4 := n.IP.To4()
	mask := []byte(n.Mask)
	if len(mask) == 16 {
		mask = mask[12:]
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip4.Mask(net.IPMask(mask))},
	}
}

// le32 is a 32-bit value in host byte order, as conntrack state bits are.
func le32(v uint32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return b
}
