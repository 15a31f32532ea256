package lab

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// applyKnobs applies the spec's knobs once the topology exists, each
// change through the lab's journal. Socket buffer limits come first: on
// this kernel they are host-wide, and a host setting another lab holds is
// refused (tune.ErrHeld) before the slower offloads and rules are made.
func (b *builder) applyKnobs(ctx context.Context) error {
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
	if len(b.s.Offloads) > 0 {
		if err := b.applyOffloads(ctx, b.s.Offloads); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if b.s.Policies > 0 {
		if err := b.applyPolicies(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if b.s.Proxy != "" {
		if err := b.applyProxy(ctx); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if b.s.Conntrack || len(b.s.Notrack) > 0 || (b.s.Services > 0 && b.s.Proxy == "") {
		if err := b.applyNft(); err != nil {
			return err
		}
	}
	if b.s.Fastpath != "" {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.applyFastpath(); err != nil {
			return err
		}
	}
	return ctx.Err()
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
		if b.s.Topology == TopoHost {
			continue
		}
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

func (b *builder) applyOffloads(_ context.Context, offs []Offload) error {
	set := make(map[string]bool, len(offs))
	for _, o := range offs {
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
