package lab

import (
	"errors"
	"fmt"
	"net"
)

// OVNSpec is the logical network of the ovn-overlay and ovn-underlay
// presets, as Kube-OVN configures stock OVN: its knobs beside the ones
// every preset shares (services → the OVN load balancer, policies →
// NetworkPolicy ACLs, mtu, dpdk and the PMD knobs).
type OVNSpec struct {
	// Tunnel is the chassis' ovn-encap-type on the overlay: "geneve"
	// (Kube-OVN's default) or "vxlan"; "" on the underlay, whose switch
	// reaches the other node through its localnet port.
	Tunnel string `json:"tunnel,omitempty"`
	// Router adds Kube-OVN's per-subnet routing: a second logical switch
	// (subnet2, 10.17.0.0/16) on the distributed router ovn-cluster, with
	// a pod on each node (endpoints routed1, routed2).
	Router bool `json:"router,omitempty"`
	// SkipConntrack are the destinations whose traffic skips conntrack in
	// the switches' ingress pipeline (Kube-OVN's
	// --skip-conntrack-dst-cidrs), through the stock-OVN stand-in of
	// ovn_nb.go.
	SkipConntrack CIDRs `json:"skip_conntrack,omitempty"`
}

// ovnTunnel is one encapsulation ovn-controller can put between chassis.
type ovnTunnel struct {
	name string
	// mtuMargin is what Kube-OVN takes off the node's MTU for the pods
	// (pkg/util/const.go: GeneveHeaderLength 100, VxlanHeaderLength 50).
	mtuMargin int
	// wire is what the userspace datapath adds to each packet: OVN's
	// GENEVE header carries one 8-byte option (Ethernet 14 + IPv4 20 +
	// UDP 8 + GENEVE 8 + 8), VXLAN none. A pod packet larger than the
	// underlay MTU minus this is dropped without an ICMP error (measured:
	// RECIPE P10), so the mtu knob refuses such a pod MTU.
	wire int
}

// ovnTunnels are the tunnel knob's values.
var ovnTunnels = map[string]ovnTunnel{
	"geneve": {name: "geneve", mtuMargin: 100, wire: 58},
	"vxlan":  {name: "vxlan", mtuMargin: 50, wire: 50},
}

// errSTT is the tunnel knob's answer to stt, Kube-OVN's third tunnel type.
var errSTT = errors.New("stt is gone from Open vSwitch: it only ever existed in OVS's out-of-tree kernel module " +
	"(removed in OVS 3.0), was deprecated in 3.5 and removed in 3.6; OVS 3.1's userspace datapath accepts an stt port " +
	"and silently drops everything sent to it; use geneve or vxlan")

func parseTunnelKnob(text string) (func(*Spec), error) {
	switch text {
	case "geneve", "vxlan":
		return func(s *Spec) { s.ovn().Tunnel = text }, nil
	case "stt":
		return nil, errSTT
	}
	return nil, errBadValue
}

func parseSkipConntrackKnob(text string) (func(*Spec), error) {
	var nets CIDRs
	if err := nets.UnmarshalText([]byte(text)); err != nil {
		return nil, errBadValue
	}
	return func(s *Spec) { s.ovn().SkipConntrack = nets }, nil
}

// ovn is the spec's OVN settings (only OVN topologies' knobs reach it).
func (s *Spec) ovn() *OVNSpec {
	if s.OVN == nil {
		s.OVN = &OVNSpec{}
	}
	return s.OVN
}

// dpdkSpec is the spec's DPDK switch, the OVN presets' own when the dpdk
// knob (or a PMD knob, which then needs it) asks for one: no hugepages
// (see ovnDPDKMemoryMB), so nothing on the host changes for memory.
func (s *Spec) dpdkSpec() *DPDKSpec {
	if s.DPDK == nil {
		s.DPDK = &DPDKSpec{MemoryMB: ovnDPDKMemoryMB}
	}
	return s.DPDK
}

// ovnDPDKMemoryMB is each OVN node's DPDK memory, from anonymous 4 KiB
// pages (--no-huge): 64 MB holds too few mbufs for OVS's shared pool,
// 128 MB gives 16,384, and EAL faults every page in at start, so more
// costs start time (256 MB: 1.8–4.0 s up, 128 MB: 0.9–1.2 s; RECIPE §6).
const ovnDPDKMemoryMB = 128

// checkOVN checks what only the whole spec shows on an OVN topology.
func (s *Spec) checkOVN() error {
	if s.OVN == nil {
		return nil
	}
	if tun, ok := ovnTunnels[s.OVN.Tunnel]; ok && s.MTU > 0 {
		under := s.UnderlayMTU
		if under == 0 {
			under = 1500
		}
		if s.MTU > under-tun.wire {
			return fmt.Errorf("knob mtu: at most %d on %s with tunnel=%s (underlay MTU %d minus the %d bytes OVN's %s adds: "+
				"OVS's userspace datapath drops larger packets without an ICMP error)", under-tun.wire, s.Topology, tun.name, under, tun.wire, tun.name)
		}
	}
	if len(s.OVN.SkipConntrack) > 0 && s.Policies > 0 {
		// Measured: the egress pipeline's conntrack then sees only the
		// client's direction of each connection (the server's replies
		// skip it on their way in), marks data beyond the window it can
		// guess invalid and the ACL stage drops it — tcp_lat of 1 KiB
		// moved nothing. Kube-OVN's patched northd skips only the load
		// balancer's conntrack (ls_in_pre_lb), not the ACLs'.
		return errors.New("knob skip_conntrack: not with policies: on stock OVN its stand-in (allow-stateless ACLs) also skips the " +
			"NetworkPolicy ACLs' conntrack on the way in, so allow-related sees one direction of each connection and drops its data " +
			"(Kube-OVN's patched ovn-northd skips only the load balancer's conntrack); use one or the other")
	}
	if s.DPDK != nil && s.MTU > dpdkMaxMTU {
		return fmt.Errorf("knob mtu: at most %d with dpdk=on (the af_packet ports' 2 KiB frames)", dpdkMaxMTU)
	}
	return nil
}

// ovnMTUMargin is what comes off the underlay MTU for the pods' default.
func (s *Spec) ovnMTUMargin() int {
	if s.OVN == nil {
		return 0
	}
	return ovnTunnels[s.OVN.Tunnel].mtuMargin
}

// The logical network: Kube-OVN's names (pkg/controller/init.go,
// pkg/util/const.go) and address plan (10.16.0.0/16 the default subnet,
// 100.64.0.0/16 the join subnet it leaves out here).
const (
	ovnRouterName  = "ovn-cluster"
	ovnDefaultName = "ovn-default"
	ovnSubnet2Name = "subnet2"
	ovnPhysnet     = "physnet1"
	ovnNamespace   = "default" // the pods' Kubernetes namespace in LSP names
	// ovnEnginePort is the Service VIP's port and its backend's: the
	// built-in engine's TCP and UDP port.
	ovnEnginePort = 7420
)

// ovnSubnet is one logical switch with its router port.
type ovnSubnet struct {
	name string
	cidr *net.IPNet
	gw   net.IP
}

var (
	ovnDefaultSubnet = ovnSubnet{ovnDefaultName, &net.IPNet{IP: net.IPv4(10, 16, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}, net.IPv4(10, 16, 0, 1).To4()}
	ovnSecondSubnet  = ovnSubnet{ovnSubnet2Name, &net.IPNet{IP: net.IPv4(10, 17, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}, net.IPv4(10, 17, 0, 1).To4()}
)

// ovnMAC is Kube-OVN's MAC for an address: 0a:58 and the IPv4 bytes.
func ovnMAC(ip net.IP) net.HardwareAddr {
	ip4 := ip.To4()
	return net.HardwareAddr{0x0a, 0x58, ip4[0], ip4[1], ip4[2], ip4[3]}
}
