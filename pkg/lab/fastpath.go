package lab

import (
	"errors"
	"fmt"

	"github.com/cnibench/cnibench/pkg/fastpath"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/vishvananda/netlink"
)

// FastpathEBPF is the fastpath knob's value for pkg/fastpath's programs.
const FastpathEBPF = "ebpf"

// fastpathNeeds are the probe capabilities the eBPF fast path uses.
var fastpathNeeds = []string{"bpf-redirect-peer", "bpf-redirect-neigh", "bpf-fib-lookup"}

// fastpathPort is the UDP port of the collect-metadata VXLAN device the
// fast path encapsulates into (Flannel's port), beside the kernel path's
// own VXLAN device on 4789: packets the programs leave to the kernel still
// find their way.
const fastpathPort = 8472

// applyFastpath attaches the eBPF host routing on both nodes: from_pod on
// every pod's node-side veth, from_netdev on the underlay (native) or on a
// collect-metadata VXLAN device (vxlan).
func (b *builder) applyFastpath() error {
	for n := 1; n <= 2; n++ {
		ns := b.lo.nodeNS[n-1]
		h, err := b.handle(ns)
		if err != nil {
			return err
		}
		node := fastpath.Node{Handle: h}
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
		switch b.s.Topology {
		case TopoBridge:
			// One L2 segment: switch past the bridge, the uplink port
			// reaches the other node's pods.
			node.L2 = true
			node.Netdevs = []string{mustIf(b.l.ID, "u")}
			for _, p := range b.lo.pods {
				if p.node != n {
					node.RemotePods = append(node.RemotePods, p.ip)
				}
			}
		case TopoNative:
			node.Netdevs = []string{mustIf(b.l.ID, "u")}
		case TopoVXLAN:
			dev, err := b.collectMDVXLAN(h, n)
			if err != nil {
				return err
			}
			node.Netdevs = []string{dev}
			node.Tunnels = []fastpath.Tunnel{{CIDR: podCIDR(3 - n), Remote: nodeIP(3 - n), VNI: vxlanVNI, Dev: dev}}
		}
		if err := fastpath.Attach(node); err != nil {
			if errors.Is(err, fastpath.ErrNotSupported) {
				return fmt.Errorf("node%d: %w (%w)", n, ErrNotSupported, err)
			}
			return fmt.Errorf("node%d: %w", n, err)
		}
	}
	b.logf("fastpath: eBPF host routing attached on %d pod veths and the nodes' %s devices",
		len(b.lo.pods), map[string]string{TopoNative: "underlay", TopoVXLAN: "VXLAN", TopoBridge: "uplink"}[b.s.Topology])
	return nil
}

// collectMDVXLAN creates node n's collect-metadata ("external") VXLAN
// device, the one a tc program steers with bpf_skb_set_tunnel_key
// (`ip link add NAME type vxlan external dstport 8472`).
func (b *builder) collectMDVXLAN(h *netlink.Handle, n int) (string, error) {
	la := netlink.NewLinkAttrs()
	la.Name = mustIf(b.l.ID, "vxm")
	la.MTU = b.lo.underMTU - overhead(TopoVXLAN)
	la.Flags = 0
	vx := &netlink.Vxlan{LinkAttrs: la, FlowBased: true, Port: fastpathPort, SrcAddr: nodeIP(n)}
	if err := h.LinkAdd(vx); err != nil {
		return "", fmt.Errorf("node%d: create collect-metadata VXLAN device %s: %w", n, la.Name, err)
	}
	if err := h.LinkSetUp(vx); err != nil {
		return "", fmt.Errorf("node%d: set %s up: %w", n, la.Name, err)
	}
	return la.Name, nil
}

// FastpathStats reads what the eBPF fast path of each node carried (node1
// first); ok is false when the lab has none.
func (l *Lab) FastpathStats() (stats []fastpath.Stats, ok bool, err error) {
	if l.Spec == nil || l.Spec.Fastpath == "" {
		return nil, false, nil
	}
	lo := makeLayout(l.Spec, l.ID)
	for n := 1; n <= 2; n++ {
		h, err := netns.Handle(lo.nodeNS[n-1])
		if err != nil {
			return nil, false, err
		}
		dev := mustIf(l.ID, "u")
		if l.Spec.Topology == TopoVXLAN {
			dev = mustIf(l.ID, "vxm")
		}
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
