package lab

import (
	"context"
	"errors"
	"fmt"

	"github.com/cnibench/cnibench/pkg/fastpath"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/vishvananda/netlink"
)

// FastpathMode is the fastpath knob's value: FastpathEBPF for pkg/fastpath's
// programs, "" for the kernel's own routing.
type FastpathMode string

// FastpathEBPF is the fastpath knob's value for pkg/fastpath's programs.
const FastpathEBPF FastpathMode = "ebpf"

// fastpathNeeds are the probe capabilities the eBPF fast path uses.
var fastpathNeeds = []string{"bpf-redirect-peer", "bpf-redirect-neigh", "bpf-fib-lookup"}

// fastpathHook is where the eBPF fast path attaches on a topology's two
// nodes: from_pod on every pod's node-side veth, from_netdev on the node
// device dev.
type fastpathHook struct {
	// where names the node devices in the log ("underlay", …).
	where string
	// dev is the suffix (cnb-<id>-<dev>) of each node's device that
	// carries from_netdev; `lab show` reads the counters there. "" = the
	// topology has no fast path.
	dev string
	// prepare, when set, completes node n's attachment before it is made:
	// the device it creates, the tunnels or remote pods it serves.
	prepare func(b *builder, h *netlink.Handle, n int, node *fastpath.Node) error
}

// supported reports whether the topology has a fast path at all.
func (f *fastpathHook) supported() bool { return f.dev != "" }

var (
	// noFastpath: the topology has no two node namespaces carrying pod
	// traffic for the programs to run on.
	noFastpath = &fastpathHook{}
	// routedFastpath (native): route with bpf_fib_lookup straight out of
	// the underlay link.
	routedFastpath = &fastpathHook{where: "underlay", dev: "u"}
	// tunnelFastpath (vxlan): encapsulate into a collect-metadata VXLAN
	// device toward the other node.
	tunnelFastpath = &fastpathHook{where: "VXLAN", dev: "vxm", prepare: (*builder).fastpathTunnel}
	// switchedFastpath (bridge with two nodes): one L2 segment; switch
	// past the bridge, the uplink port reaches the other node's pods.
	switchedFastpath = &fastpathHook{where: "uplink", dev: "u", prepare: (*builder).fastpathSwitch}
)

// applyFastpath attaches the eBPF host routing on both nodes, where the
// topology's fastpathHook says.
func (b *builder) applyFastpath(context.Context) error {
	hook := b.s.row().fastpath
	for n := 1; n <= 2; n++ {
		ns := b.lo.nodeNS[n-1]
		h, err := b.handle(ns)
		if err != nil {
			return err
		}
		node := fastpath.Node{Handle: h, Netdevs: []string{mustIf(b.l.ID, hook.dev)}}
		for _, p := range b.lo.pods {
			if p.node != n {
				continue
			}
			_, eth, err := b.podEth(p)
			if err != nil {
				return fmt.Errorf("fastpath: %w", err)
			}
			node.Pods = append(node.Pods, fastpath.Pod{IP: p.ip, MAC: eth.Attrs().HardwareAddr, HostIf: p.hostIf})
		}
		if hook.prepare != nil {
			if err := hook.prepare(b, h, n, &node); err != nil {
				return err
			}
		}
		if err := fastpath.Attach(node); err != nil {
			if errors.Is(err, fastpath.ErrNotSupported) {
				return fmt.Errorf("node%d: %w (%w)", n, ErrNotSupported, err)
			}
			return fmt.Errorf("node%d: %w", n, err)
		}
	}
	b.logf("fastpath: eBPF host routing attached on %d pod veths and the nodes' %s devices", len(b.lo.pods), hook.where)
	return nil
}

// fastpathTunnel gives node n the collect-metadata VXLAN device the
// programs encapsulate into, and the tunnel to the other node's pods.
func (b *builder) fastpathTunnel(h *netlink.Handle, n int, node *fastpath.Node) error {
	dev := node.Netdevs[0]
	if err := b.addFastpathVXLAN(h, n, dev); err != nil {
		return err
	}
	node.Tunnels = []fastpath.Tunnel{{CIDR: podCIDR(3 - n), Remote: nodeIP(3 - n), VNI: vxlanVNI, Dev: dev}}
	return nil
}

// fastpathSwitch makes node n's programs switch (not route) and names the
// other node's pods, which its uplink reaches.
func (b *builder) fastpathSwitch(_ *netlink.Handle, n int, node *fastpath.Node) error {
	node.L2 = true
	for _, p := range b.lo.pods {
		if p.node != n {
			node.RemotePods = append(node.RemotePods, p.ip)
		}
	}
	return nil
}

// FastpathStats reads what the eBPF fast path of each node carried (node1
// first); ok is false when the lab has none.
func (l *Lab) FastpathStats() (stats []fastpath.Stats, ok bool, err error) {
	if l.Spec == nil || l.Spec.Fastpath == "" {
		return nil, false, nil
	}
	t, err := lookupTopology(l.Spec.Topology)
	if err != nil {
		return nil, false, err
	}
	hook := t.fastpath
	if !hook.supported() {
		return nil, false, fmt.Errorf("fastpath=%s on %s, which has no fast path", l.Spec.Fastpath, t.name)
	}
	lo := makeLayout(l.Spec, l.ID)
	for n := 1; n <= 2; n++ {
		h, err := netns.Handle(lo.nodeNS[n-1])
		if err != nil {
			return nil, false, err
		}
		dev := mustIf(l.ID, hook.dev)
		s, found, err := fastpath.Read(h, dev)
		h.Close()
		if err != nil {
			return nil, false, fmt.Errorf("node%d: %w", n, err)
		}
		if !found {
			return nil, false, fmt.Errorf("node%d: no fast path on %s", n, dev)
		}
		stats = append(stats, s)
	}
	return stats, true, nil
}
