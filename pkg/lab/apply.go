package lab

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// How knobs take effect. The layout reads some of them (MTUs, the shape)
// before anything is built, a topology's builder others (its switch's
// settings); the rest are applied by the steps below once the topology
// exists, each change through the lab's journal (journal.go). Each knob's
// entry (knobs.go) names its step.

// applyStep is one way knobs take effect.
type applyStep struct {
	name string
	// run applies every knob of the step the spec sets; nil for the
	// knobs the layout or a builder reads.
	run func(b *builder, ctx context.Context) error
}

var (
	byLayout  = &applyStep{name: "read by the layout (names, addresses, MTUs) before anything is built"}
	byBuilder = &applyStep{name: "read by the topology's builder"}
	// byOVNNorthbound: written into the OVN northbound database in the one
	// transaction that creates the logical network (ovn_nb.go).
	byOVNNorthbound = &applyStep{name: "written into OVN's northbound database with the logical network"}

	applySocketBufsStep = &applyStep{name: "socket buffer limits, journaled", run: (*builder).applySocketBufs}
	applyOffloadsStep   = &applyStep{name: "ethtool features of pod and host-side interfaces, journaled", run: (*builder).applyOffloads}
	applyPoliciesStep   = &applyStep{name: "NetworkPolicy-style nftables rules in the server's node", run: (*builder).applyPolicies}
	applyProxyStep      = &applyStep{name: "kube-proxy's rules on every node", run: (*builder).applyProxy}
	applyNftStep        = &applyStep{name: "conntrack, notrack and Service DNAT rules in one nftables table per namespace", run: (*builder).applyNft}
	applyFastpathStep   = &applyStep{name: "the eBPF fast path on the nodes", run: (*builder).applyFastpath}
	// After the nftables table: its ct expression is what loads
	// nf_conntrack and makes the sysctls exist.
	applyConntrackLimitsStep = &applyStep{name: "conntrack table size, buckets and TCP timeouts, journaled", run: (*builder).applyConntrackLimits}
)

// applyOrder is the order applyKnobs runs the steps in. Socket buffer
// limits come first: on this kernel they are host-wide, and a host setting
// another lab holds is refused (tune.ErrHeld) before the slower offloads
// and rules are made. The fast path comes last, onto finished nodes.
var applyOrder = []*applyStep{applySocketBufsStep, applyOffloadsStep, applyPoliciesStep, applyProxyStep, applyNftStep, applyConntrackLimitsStep, applyFastpathStep}

// applyKnobs runs, in applyOrder, each step a knob of the spec needs.
func (b *builder) applyKnobs(ctx context.Context) error {
	for _, step := range applyOrder {
		if !b.s.uses(step) {
			continue
		}
		if err := step.run(b, ctx); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// applySocketBufs sets net.core.rmem_max and wmem_max where the spec has
// them.
func (b *builder) applySocketBufs(ctx context.Context) error {
	for _, kv := range []struct {
		name string
		v    int64
	}{{"net.core.rmem_max", b.s.RmemMax}, {"net.core.wmem_max", b.s.WmemMax}} {
		if kv.v == 0 {
			continue
		}
		if err := b.socketBufMax(kv.name, strconv.FormatInt(kv.v, 10)); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// socketBufMax sets net.core.[rw]mem_max in every lab namespace where the
// kernel makes it per-namespace; otherwise (as on most kernels, 6.18
// included) it is host-wide, and the lab changes it on the host, journaled,
// until Down.
func (b *builder) socketBufMax(name, value string) error {
	per, err := nsSysctlWritable(b.l.Namespaces[0], name)
	if err != nil {
		return err
	}
	if per {
		for _, ns := range b.l.Namespaces {
			if err := b.sysctl(ns, name, value); err != nil {
				return err
			}
		}
		return nil
	}
	b.logf("%s is host-wide on this kernel: setting it on the host until `lab down` (journal %s)", name, journalDir())
	return b.sysctl("", name, value)
}

// offloadTargets lists (namespace, interface) pairs the offloads knob
// applies to: every pod's eth0 and every host-side veth end.
func (b *builder) offloadTargets() [][2]string {
	var out [][2]string
	seen := map[string]bool{}
	for _, p := range b.lo.pods {
		if !seen[p.netns] {
			seen[p.netns] = true
			out = append(out, [2]string{p.netns, "eth0"})
		}
		if p.hostIf != "" {
			hostNS := ""
			if p.node > 0 && len(b.lo.nodeNS) >= p.node {
				hostNS = b.lo.nodeNS[p.node-1]
			}
			out = append(out, [2]string{hostNS, p.hostIf})
		}
	}
	return out
}

// applyOffloads sets the offloads knob's features on every pod's eth0 and
// host-side veth end.
func (b *builder) applyOffloads(context.Context) error {
	set := make(map[string]bool, len(b.s.Offloads))
	for _, o := range b.s.Offloads {
		set[o.Feature] = o.On
	}
	for _, t := range b.offloadTargets() {
		// One ethtool path for cnibench: tune's SIOCETHTOOL ioctl, run
		// inside the interface's namespace, journaled.
		fixed, err := b.offloads(t[0], t[1], set)
		if err != nil {
			return fmt.Errorf("offloads in %s: %w", nsLabel(t[0]), err)
		}
		if len(fixed) > 0 {
			b.logf("offloads: %s fixed by the driver of %s in %s, left as is", strings.Join(fixed, ", "), t[1], nsLabel(t[0]))
		}
	}
	return nil
}
