package lab

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/tune"
)

// applyKnobs applies the spec's knobs once the topology exists.
func (b *builder) applyKnobs(ctx context.Context) error {
	if len(b.s.Offloads) > 0 {
		if err := b.applyOffloads(ctx, b.s.Offloads); err != nil {
			return err
		}
	}
	if b.s.Conntrack || len(b.s.Notrack) > 0 || b.s.Services > 0 {
		if err := b.applyNft(); err != nil {
			return err
		}
	}
	for key, v := range map[string]int64{"net/core/rmem_max": b.s.RmemMax, "net/core/wmem_max": b.s.WmemMax} {
		if v == 0 {
			continue
		}
		if err := b.socketBufMax(key, strconv.FormatInt(v, 10)); err != nil {
			return err
		}
	}
	return nil
}

// socketBufMax sets net.core.[rw]mem_max in every lab namespace where the
// kernel makes it per-namespace; otherwise (as on most kernels before 6.x
// namespaced it) it is host-wide, and the lab changes it on the host with a
// journal so Down restores the old value.
func (b *builder) socketBufMax(key, value string) error {
	probeNS := b.l.Namespaces[0]
	per, err := nsSysctlWritable(probeNS, key)
	if err != nil {
		return err
	}
	if per {
		for _, ns := range b.l.Namespaces {
			if err := nsSysctl(ns, key, value); err != nil {
				return err
			}
		}
		return nil
	}
	b.logf("%s is host-wide on this kernel: setting it on the host until `lab down`", strings.ReplaceAll(key, "/", "."))
	return b.hostSysctl(key, value)
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
		// inside the interface's namespace.
		fixed, err := tune.SetOffloads(t[0], t[1], set)
		if err != nil {
			return fmt.Errorf("offloads in %s: %w", nsLabel(t[0]), err)
		}
		if len(fixed) > 0 {
			b.logf("offloads: %s fixed by the driver of %s in %s, left as is", strings.Join(fixed, ", "), t[1], nsLabel(t[0]))
		}
	}
	return nil
}
