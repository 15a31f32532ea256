package lab

import (
	"context"
	"fmt"
	"net"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// NetworkPolicy-style ingress filtering: the policies=N knob.
//
// A NetworkPolicy implementation (Calico, kube-router, Cilium without eBPF)
// filters a pod's ingress in the node that hosts it: established traffic is
// accepted first, and a new connection is checked against the allowed
// peers, then dropped. The knob writes that shape in the server's node,
// with N allowed peers of which the client is the last one, in one of two
// forms:
//
//	policy_mode=linear  N rules `ip saddr PEER accept`, walked in order
//	                    (iptables-style implementations)
//	policy_mode=set     one rule `ip saddr @allowed accept` over a hash set
//	                    of N addresses (ipset- and nft-set-style ones)
//
// so the cost of N policies and of the two representations can be measured
// (tcp_crr pays it per connection; every packet pays the conntrack lookup).

// PolicyMode is the policy_mode knob's value: how the policies are written.
type PolicyMode string

// Policy modes of the policy_mode knob.
const (
	PolicyLinear PolicyMode = "linear"
	PolicySet    PolicyMode = "set"
	maxPolicies             = 10000
)

// policyPeers lists the allowed peers: N-1 addresses no pod has, then the
// client (so a linear walk passes every other rule first).
func policyPeers(n int, client net.IP) []net.IP {
	out := make([]net.IP, 0, n)
	for i := 0; i < n-1; i++ {
		k := i % fakeEndpoints
		out = append(out, net.IPv4(10, 244, byte(3+k/256), byte(k%256)).To4())
	}
	return append(out, client)
}

// policyTable names the lab's policy table in the server's node.
func policyTable(id string) string { return nameOfTable(id) + "-policy" }

// addPolicyRules queues the policy ruleset for the pod at podIP on c.
func addPolicyRules(c *nftables.Conn, table string, mode PolicyMode, podIP net.IP, peers []net.IP) error {
	t := c.AddTable(&nftables.Table{Name: table, Family: nftables.TableFamilyIPv4})
	pol := nftables.ChainPolicyAccept
	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &pol})
	ingress := c.AddChain(&nftables.Chain{Name: "pod-ingress", Table: t})
	// ip daddr POD jump pod-ingress
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: append(matchAddr(16, podIP),
		&expr.Verdict{Kind: expr.VerdictJump, Chain: ingress.Name})})
	// ct state established,related accept
	c.AddRule(&nftables.Rule{Table: t, Chain: ingress, Exprs: []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: le32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: le32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: le32(0)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}})
	switch mode {
	case PolicyLinear:
		for _, p := range peers {
			c.AddRule(&nftables.Rule{Table: t, Chain: ingress, Exprs: append(matchAddr(12, p),
				&expr.Verdict{Kind: expr.VerdictAccept})})
		}
	case PolicySet:
		set := &nftables.Set{Table: t, Name: "allowed", KeyType: nftables.TypeIPAddr}
		if err := c.AddSet(set, nil); err != nil {
			return fmt.Errorf("policies: set: %w", err)
		}
		els := make([]nftables.SetElement, len(peers))
		for i, p := range peers {
			els[i] = nftables.SetElement{Key: p.To4()}
		}
		for len(els) > 0 {
			n := min(len(els), elemChunk)
			if err := c.SetAddElements(set, els[:n]); err != nil {
				return fmt.Errorf("policies: set elements: %w", err)
			}
			els = els[n:]
		}
		// ip saddr @allowed accept
		c.AddRule(&nftables.Rule{Table: t, Chain: ingress, Exprs: []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
			&expr.Verdict{Kind: expr.VerdictAccept},
		}})
	default:
		return fmt.Errorf("policies: unknown mode %q", mode)
	}
	// Everything else to the pod is dropped, as a default-deny policy does.
	c.AddRule(&nftables.Rule{Table: t, Chain: ingress, Exprs: []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}})
	return nil
}

// applyPolicies filters the server pod's ingress in its node.
func (b *builder) applyPolicies(context.Context) error {
	server, client := b.lo.endpoints()
	ns := b.lo.nodeNS[server.node-1]
	mode := b.s.PolicyMode
	if mode == "" {
		mode = PolicyLinear
	}
	c, done, err := nftConn(ns, nftables.WithSockOptions(sndbufForce(1<<20+512*b.s.Policies)))
	if err != nil {
		return err
	}
	defer done()
	if err := addPolicyRules(c, policyTable(b.l.ID), mode, server.ip, policyPeers(b.s.Policies, client.ip)); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("policies: table %s in %s: %w", policyTable(b.l.ID), nsLabel(ns), err)
	}
	b.logf("policies: %d allowed peers (%s) on the server pod's ingress in node%d", b.s.Policies, mode, server.node)
	return nil
}
