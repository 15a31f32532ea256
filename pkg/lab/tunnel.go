package lab

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Tunnel devices: the kernel VXLAN, GENEVE and IPIP devices the overlay
// presets route pod traffic through (addTunnel), and the collect-metadata
// VXLAN device the eBPF fast path encapsulates into (addFastpathVXLAN).

// tunnel is a topology's encapsulation between its nodes.
type tunnel struct {
	// name is the device kind, in errors and logs.
	name string
	// overhead is what the encapsulation adds to each packet: the pods'
	// default MTU is the underlay's minus this.
	overhead int
	// kernelOption is the kernel option the device needs, named when the
	// kernel refuses to create it.
	kernelOption string
	// ifSuffix names the device on each node (cnb-<id>-<suffix>).
	ifSuffix string
	// device is the netlink link of node n's end, whose other end is the
	// other node over the underlay link ul. nil: no kernel device (no
	// tunnel, or one a userspace switch makes).
	device func(la netlink.LinkAttrs, n int, ul netlink.Link) netlink.Link
	// pointToPoint devices carry no address: the route to the other
	// node's pods needs no next hop.
	pointToPoint bool
}

const (
	vxlanVNI    = 42
	vxlanPort   = 4789
	genevePort  = 6081
	tunnelBytes = 50 // outer IPv4 20 + UDP 8 + VXLAN or GENEVE header 8 + inner Ethernet 14
)

var (
	// noTunnel: pods reach each other without encapsulation.
	noTunnel = &tunnel{name: "none"}
	// vxlanTunnel: VNI 42 on UDP 4789, from this node's underlay address
	// to the other node's (`ip link add vx type vxlan id 42 dev u local
	// 172.31.0.N remote 172.31.0.M dstport 4789`).
	vxlanTunnel = &tunnel{name: "vxlan", overhead: tunnelBytes, kernelOption: "CONFIG_VXLAN", ifSuffix: "vx", device: vxlanDevice}
	// geneveTunnel: VNI 42 on UDP 6081 (`ip link add gn type geneve id
	// 42 remote 172.31.0.M`).
	geneveTunnel = &tunnel{name: "geneve", overhead: tunnelBytes, kernelOption: "CONFIG_GENEVE", ifSuffix: "gn", device: geneveDevice}
	// ipipTunnel: IPv4 in IPv4, 20 bytes (`ip link add tn type ipip
	// local 172.31.0.N remote 172.31.0.M dev u pmtudisc`).
	ipipTunnel = &tunnel{name: "ipip", overhead: 20, kernelOption: "CONFIG_NET_IPIP", ifSuffix: "tn", device: ipipDevice, pointToPoint: true}
	// ovsGeneveTunnel: a GENEVE port of the nodes' userspace Open
	// vSwitch (ovs.go), not a kernel device.
	ovsGeneveTunnel = &tunnel{name: "geneve (Open vSwitch port)", overhead: tunnelBytes}
	// ovnOverlayTunnel: the tunnel ports ovn-controller makes between
	// chassis; its type and the pods' MTU margin come from the tunnel
	// knob (ovn_spec.go), so the row's own overhead is none.
	ovnOverlayTunnel = &tunnel{name: "geneve or vxlan (OVN chassis tunnel)"}
)

func vxlanDevice(la netlink.LinkAttrs, n int, ul netlink.Link) netlink.Link {
	return &netlink.Vxlan{LinkAttrs: la, VxlanId: vxlanVNI, VtepDevIndex: ul.Attrs().Index,
		SrcAddr: nodeIP(n), Group: nodeIP(3 - n), Port: vxlanPort, Learning: true}
}

func geneveDevice(la netlink.LinkAttrs, n int, _ netlink.Link) netlink.Link {
	return &netlink.Geneve{LinkAttrs: la, ID: vxlanVNI, Remote: nodeIP(3 - n), Dport: genevePort}
}

func ipipDevice(la netlink.LinkAttrs, n int, ul netlink.Link) netlink.Link {
	return &netlink.Iptun{LinkAttrs: la, Local: nodeIP(n), Remote: nodeIP(3 - n), Link: uint32(ul.Attrs().Index), PMtuDisc: 1}
}

// addTunnel creates node n's tunnel device of the topology's kind over
// the underlay link ul, up, at the underlay MTU less the encapsulation,
// and returns it. A kernel without the device's option gives
// ErrNotSupported naming the option.
func (b *builder) addTunnel(h *netlink.Handle, n int, ul netlink.Link) (netlink.Link, error) {
	tun := b.s.row().tunnel
	la := netlink.NewLinkAttrs()
	la.Name, la.Flags, la.MTU = mustIf(b.l.ID, tun.ifSuffix), net.FlagUp, b.lo.underMTU-tun.overhead
	if err := h.LinkAdd(tun.device(la, n, ul)); err != nil {
		err = fmt.Errorf("create %s device %s: %w", tun.name, la.Name, err)
		if errors.Is(err, unix.EOPNOTSUPP) { // the kernel's answer to an unknown link kind
			return nil, fmt.Errorf("%s: %w by this kernel (%s)", b.s.Topology, ErrNotSupported, tun.kernelOption)
		}
		return nil, err
	}
	return h.LinkByName(la.Name)
}

// routeThroughTunnel routes the other node's pod CIDR through node n's
// tunnel device tl: `ip route add 10.244.M.0/24 via 10.245.0.M dev TUN`
// after giving it its address, or `dev TUN` alone on a point-to-point one.
func (b *builder) routeThroughTunnel(h *netlink.Handle, n int, tl netlink.Link) error {
	m := 3 - n
	if b.s.row().tunnel.pointToPoint {
		return h.RouteAdd(&netlink.Route{LinkIndex: tl.Attrs().Index, Dst: podCIDR(m), Scope: netlink.SCOPE_LINK})
	}
	if err := h.AddrAdd(tl, &netlink.Addr{IPNet: &net.IPNet{IP: tunIP(n), Mask: net.CIDRMask(24, 32)}}); err != nil {
		return fmt.Errorf("tunnel address: %w", err)
	}
	return h.RouteAdd(&netlink.Route{LinkIndex: tl.Attrs().Index, Dst: podCIDR(m), Gw: tunIP(m)})
}

// fastpathPort is the UDP port of the collect-metadata VXLAN device the
// fast path encapsulates into (Flannel's port), beside the kernel path's
// own VXLAN device on 4789: packets the programs leave to the kernel still
// find their way.
const fastpathPort = 8472

// addFastpathVXLAN creates node n's collect-metadata ("external") VXLAN
// device name, the one a tc program steers with bpf_skb_set_tunnel_key
// (`ip link add NAME type vxlan external dstport 8472`).
func (b *builder) addFastpathVXLAN(h *netlink.Handle, n int, name string) error {
	la := netlink.NewLinkAttrs()
	la.Name = name
	la.MTU = b.lo.underMTU - vxlanTunnel.overhead
	la.Flags = 0
	vx := &netlink.Vxlan{LinkAttrs: la, FlowBased: true, Port: fastpathPort, SrcAddr: nodeIP(n)}
	if err := h.LinkAdd(vx); err != nil {
		return fmt.Errorf("node%d: create collect-metadata VXLAN device %s: %w", n, la.Name, err)
	}
	if err := h.LinkSetUp(vx); err != nil {
		return fmt.Errorf("node%d: set %s up: %w", n, la.Name, err)
	}
	return nil
}
