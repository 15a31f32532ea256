package lab

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// kubeProxyTable is the table kube-proxy's nftables mode owns.
const kubeProxyTable = "kube-proxy"

// elemChunk bounds the map elements of one netlink message.
const elemChunk = 256

// addNFTablesRules queues kube-proxy's nftables-mode ruleset for ports on c;
// the caller sends it with one c.Flush() — one netlink batch, as kube-proxy
// does. Shape (pkg/proxy/nftables): the service-ips verdict map keyed by
// daddr . l4proto . dport, a chain per service port that marks outside
// traffic for masquerade and picks an endpoint with numgen, a chain per
// endpoint that DNATs.
func addNFTablesRules(c *nftables.Conn, ports []svcPort) error {
	t := c.AddTable(&nftables.Table{Name: kubeProxyTable, Family: nftables.TableFamilyIPv4})
	chain := func(name string) *nftables.Chain {
		return c.AddChain(&nftables.Chain{Name: name, Table: t})
	}
	base := func(name string, typ nftables.ChainType, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		return c.AddChain(&nftables.Chain{Name: name, Table: t, Type: typ, Hooknum: hook, Priority: prio})
	}
	rule := func(ch *nftables.Chain, e ...expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: e}) }
	jump := func(to string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictJump, Chain: to} }

	mark := chain("mark-for-masquerade")
	// meta mark set meta mark | 0x4000
	rule(mark, &expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: ne32(^uint32(masqMark)), Xor: ne32(masqMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
	masq := chain("masquerading")
	// meta mark & 0x4000 == 0 return; meta mark set meta mark ^ 0x4000;
	// masquerade fully-random
	rule(masq, &expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: ne32(masqMark), Xor: ne32(0)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ne32(0)}, &expr.Verdict{Kind: expr.VerdictReturn})
	rule(masq, &expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: ne32(^uint32(0)), Xor: ne32(masqMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
	rule(masq, &expr.Masq{FullyRandom: true})

	services := chain("services")
	for _, p := range ports {
		if err := writeNFTService(c, t, mark, chain(nftSvcChain(p)), p); err != nil {
			return err
		}
	}
	// The service-ips map: ip daddr . meta l4proto . th dport vmap @service-ips
	ips := &nftables.Set{Table: t, Name: "service-ips", IsMap: true, Concatenation: true,
		KeyType:  nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService),
		DataType: nftables.TypeVerdict}
	var els []nftables.SetElement
	for _, p := range ports {
		k := make([]byte, 12) // each field padded to 4 bytes
		copy(k[0:4], p.vip.To4())
		k[4] = protoNum(p.proto)
		binary.BigEndian.PutUint16(k[8:10], uint16(p.port))
		els = append(els, nftables.SetElement{Key: k, VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: nftSvcChain(p)}})
	}
	// Elements go in messages of at most elemChunk: a message's element
	// list is one netlink attribute, whose length is 16 bits — about 850
	// of these elements; past that the kernel misreads the batch (ENOENT).
	if err := c.AddSet(ips, nil); err != nil {
		return fmt.Errorf("proxy=nftables: service-ips: %w", err)
	}
	for len(els) > 0 {
		n := min(len(els), elemChunk)
		if err := c.SetAddElements(ips, els[:n]); err != nil {
			return fmt.Errorf("proxy=nftables: service-ips: %w", err)
		}
		els = els[n:]
	}
	rule(services,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 9},
		&expr.Payload{DestRegister: 10, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: ips.Name, SetID: ips.ID})

	for _, b := range []struct {
		name string
		hook *nftables.ChainHook
		prio *nftables.ChainPriority
		to   string
	}{
		{"nat-prerouting", nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest, services.Name},
		{"nat-output", nftables.ChainHookOutput, nftables.ChainPriorityNATDest, services.Name},
		{"nat-postrouting", nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource, masq.Name},
	} {
		rule(base(b.name, nftables.ChainTypeNAT, b.hook, b.prio), jump(b.to))
	}
	// filter-forward: ct state invalid drop
	ff := base("filter-forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter)
	rule(ff, &expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: le32(expr.CtStateBitINVALID), Xor: le32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: le32(0)},
		&expr.Verdict{Kind: expr.VerdictDrop})
	return nil
}

// matchAddr is `ip saddr ADDR` (offset 12) or `ip daddr ADDR` (16).
func matchAddr(off uint32, ip net.IP) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip.To4()},
	}
}

func protoNum(p string) byte {
	if p == "udp" {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

// ne32 is a 32-bit value in host byte order (marks, numgen results).
func ne32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// nftBatchBytes estimates the netlink batch of ports: a few hundred bytes a
// rule and a map element, with room to spare.
func nftBatchBytes(ports []svcPort) int {
	return 1<<20 + 1024*nftablesRuleCount(ports)
}

// sndbufForce raises the netlink socket's buffers past net.core.[rw]mem_max
// (SO_SNDBUFFORCE, as root), as nft itself does: the whole ruleset goes in
// one batch, one sendmsg, and a batch larger than the buffer is refused
// with EMSGSIZE (30,000 services are about 20 MB).
func sndbufForce(n int) nftables.SockOption {
	return func(c *netlink.Conn) error {
		rc, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n)
			if serr == nil {
				// The kernel acknowledges every message of the batch:
				// the replies need room too, or the read fails ENOBUFS.
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
			}
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("netlink send buffer of %d bytes: %w", n, serr)
		}
		return nil
	}
}

// writeNFTService queues one service port's endpoint chains and the rules
// of its service chain sc: the masquerade mark for outside sources, then
// the endpoint choice.
func writeNFTService(c *nftables.Conn, t *nftables.Table, mark, sc *nftables.Chain, p svcPort) error {
	rule := func(ch *nftables.Chain, e ...expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: e}) }
	jump := func(to string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictJump, Chain: to} }
	chain := func(name string) *nftables.Chain { return c.AddChain(&nftables.Chain{Name: name, Table: t}) }
	for _, ep := range p.endpoints {
		ec := chain(nftEpChain(p, ep))
		// ip saddr EP jump mark-for-masquerade (hairpin)
		rule(ec, append(matchAddr(12, ep), jump(mark.Name))...)
		// meta l4proto P dnat ip to EP:PORT
		rule(ec, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNum(p.proto)}},
			&expr.Immediate{Register: 1, Data: ep.To4()},
			&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(uint16(p.port))},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: uint32(nftables.TableFamilyIPv4), RegAddrMin: 1, RegProtoMin: 2})
	}
	// ip daddr VIP P dport PORT ip saddr != CLUSTER jump mark-for-masquerade
	_, cluster, _ := net.ParseCIDR(clusterCIDR)
	e := matchAddr(16, p.vip)
	e = append(e, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNum(p.proto)}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(uint16(p.port))},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte(cluster.Mask), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: cluster.IP.To4()},
		jump(mark.Name))
	rule(sc, e...)
	if len(p.endpoints) == 1 {
		// One endpoint: goto it. `numgen random mod 1 vmap { 0 : goto
		// … }` picks the same chain, but every such anonymous map makes
		// the kernel's set-name allocation scan all the table's sets:
		// measured here, 10,000 services took 86–89 s of kernel time to
		// load with the maps and 1.9 s without (docs/lab.md).
		rule(sc, &expr.Verdict{Kind: expr.VerdictGoto, Chain: nftEpChain(p, p.endpoints[0])})
		return nil
	}
	// numgen random mod M vmap { 0 : goto endpoint-…, … }
	vm := &nftables.Set{Table: t, Anonymous: true, Constant: true, IsMap: true,
		KeyType: nftables.TypeInteger, DataType: nftables.TypeVerdict}
	var els []nftables.SetElement
	for i, ep := range p.endpoints {
		els = append(els, nftables.SetElement{Key: ne32(uint32(i)),
			VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: nftEpChain(p, ep)}})
	}
	if err := c.AddSet(vm, els); err != nil {
		return fmt.Errorf("proxy=nftables: endpoint map of %s: %w", p.name, err)
	}
	rule(sc, &expr.Numgen{Register: 1, Modulus: uint32(len(p.endpoints)), Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: vm.Name, SetID: vm.ID})
	return nil
}
