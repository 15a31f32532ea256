package lab

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/netns"
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

func (b *builder) applyOffloads(ctx context.Context, offs []Offload) error {
	args := []string{}
	for _, o := range offs {
		v := "off"
		if o.On {
			v = "on"
		}
		args = append(args, o.Feature, v)
	}
	for _, t := range b.offloadTargets() {
		if err := ethtoolK(ctx, t[0], t[1], args...); err != nil {
			return err
		}
	}
	return nil
}

// ethtoolK runs `ethtool -K IF feature on|off ...` inside ns. The ethtool
// binary speaks the kernel's ethtool netlink/ioctl interface; vishvananda/
// netlink has no feature-setting call.
func ethtoolK(ctx context.Context, ns, ifname string, featureArgs ...string) error {
	path, err := exec.LookPath("ethtool")
	if err != nil {
		return fmt.Errorf("offloads: ethtool not found (Debian package ethtool): %w", err)
	}
	cmd := exec.CommandContext(ctx, path, append([]string{"-K", ifname}, featureArgs...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := netns.Start(ns, cmd); err != nil {
		return fmt.Errorf("ethtool -K %s: %w", ifname, err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("ethtool -K %s %s in %s: %v: %s", ifname, strings.Join(featureArgs, " "), nsLabel(ns), err, strings.TrimSpace(out.String()))
	}
	return nil
}
