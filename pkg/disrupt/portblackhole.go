package disrupt

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A blackhole made from inside a cluster (`k8s disrupt --events
// blackhole`): a pod on the host network of a node drops the probes'
// port there for a known time. Unlike the lab's, which drops everything
// in a namespace the lab owns, it must spare the node's own traffic
// (kubelet, the API, other pods), and it must not outlive the pod that
// made it, whatever ends the pod: its table carries NFT_TABLE_F_OWNER, so
// the kernel deletes it when the netlink socket that made it closes — at
// lift, or when the process dies, SIGKILL included.
//
// google/nftables (v0.3.0, the newest the module proxy serves) always
// sends a table's flags as 0, and an owned table can only be filled
// through its owner's socket, so the four messages are written here, on a
// socket of our own; the rule's expressions are still google/nftables'.

// nftTableOwner is NFT_TABLE_F_OWNER (linux/netfilter/nf_tables.h, 5.12).
const nftTableOwner = 0x2

// ErrBlackhole is matched by PortBlackhole's errors.
var ErrBlackhole = errors.New("blackhole")

// PortBlackhole drops IPv4 TCP and UDP to port in the caller's network
// namespace from prerouting at raw priority (before any DNAT, so a
// Service's port is matched as the client sent it) until lift is called.
// table names it (cnb-<id>-blackhole). It needs CAP_NET_ADMIN there and a
// kernel of 5.12 or later (owned tables).
func PortBlackhole(table string, port uint16) (lift func() error, err error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: netfilter netlink: %v", ErrBlackhole, err)
	}
	msgs, err := blackholeMessages(table, port)
	if err == nil {
		err = sendBatch(c, msgs)
	}
	if err != nil {
		c.Close()
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
			err = fmt.Errorf("%v (owned nftables tables need Linux 5.12 or later)", err)
		}
		return nil, fmt.Errorf("%w: add table %s: %v", ErrBlackhole, table, err)
	}
	// The kernel deletes an owned table when its socket closes.
	return c.Close, nil
}

// blackholeMessages are the table (owned), its prerouting chain and a
// drop rule per protocol.
func blackholeMessages(table string, port uint16) ([]netlink.Message, error) {
	be32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	name := func(s string) []byte { return append([]byte(s), 0) }
	msg := func(typ int, flags netlink.HeaderFlags, attrs []netlink.Attribute) (netlink.Message, error) {
		b, err := netlink.MarshalAttributes(attrs)
		return netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | typ), Flags: netlink.Request | netlink.Acknowledge | flags},
			Data:   append([]byte{unix.NFPROTO_IPV4, unix.NFNETLINK_V0, 0, 0}, b...),
		}, err
	}
	raw := int32(-300) // NF_IP_PRI_RAW
	hook, err := netlink.MarshalAttributes([]netlink.Attribute{
		{Type: unix.NFTA_HOOK_HOOKNUM, Data: be32(unix.NF_INET_PRE_ROUTING)},
		{Type: unix.NFTA_HOOK_PRIORITY, Data: be32(uint32(raw))},
	})
	if err != nil {
		return nil, err
	}
	var out []netlink.Message
	add := func(m netlink.Message, err error) error {
		out = append(out, m)
		return err
	}
	if err := add(msg(unix.NFT_MSG_NEWTABLE, netlink.Create, []netlink.Attribute{
		{Type: unix.NFTA_TABLE_NAME, Data: name(table)},
		{Type: unix.NFTA_TABLE_FLAGS, Data: be32(nftTableOwner)},
	})); err != nil {
		return nil, err
	}
	if err := add(msg(unix.NFT_MSG_NEWCHAIN, netlink.Create, []netlink.Attribute{
		{Type: unix.NFTA_CHAIN_TABLE, Data: name(table)},
		{Type: unix.NFTA_CHAIN_NAME, Data: name("prerouting")},
		{Type: unix.NLA_F_NESTED | unix.NFTA_CHAIN_HOOK, Data: hook},
		{Type: unix.NFTA_CHAIN_TYPE, Data: name("filter")},
	})); err != nil {
		return nil, err
	}
	dport := binary.BigEndian.AppendUint16(nil, port)
	for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
		var elems []netlink.Attribute
		for _, e := range []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			// The destination port: bytes 2–3 of the TCP and the UDP header.
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: dport},
			&expr.Verdict{Kind: expr.VerdictDrop},
		} {
			b, err := expr.Marshal(unix.NFPROTO_IPV4, e)
			if err != nil {
				return nil, err
			}
			elems = append(elems, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: b})
		}
		list, err := netlink.MarshalAttributes(elems)
		if err != nil {
			return nil, err
		}
		if err := add(msg(unix.NFT_MSG_NEWRULE, netlink.Create|netlink.Append, []netlink.Attribute{
			{Type: unix.NFTA_RULE_TABLE, Data: name(table)},
			{Type: unix.NFTA_RULE_CHAIN, Data: name("prerouting")},
			{Type: unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS, Data: list},
		})); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sendBatch sends msgs as one nftables transaction and waits for each
// one's acknowledgement; the first error the kernel returns is the
// batch's (it applied none of it).
func sendBatch(c *netlink.Conn, msgs []netlink.Message) error {
	edge := func(typ int) netlink.Message {
		return netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: netlink.Request},
			Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES}}
	}
	batch := append(append([]netlink.Message{edge(unix.NFNL_MSG_BATCH_BEGIN)}, msgs...), edge(unix.NFNL_MSG_BATCH_END))
	if _, err := c.SendMessages(batch); err != nil {
		return err
	}
	for acked := 0; acked < len(msgs); {
		rs, err := c.Receive()
		if err != nil {
			return err
		}
		acked += len(rs)
	}
	return nil
}
