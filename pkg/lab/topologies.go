package lab

import (
	"context"
	"fmt"
	"strings"
)

// The topology registry: one row per preset with every fact the package
// knows about it, so that adding a datapath is one row here and one
// builder. Nothing outside this file asks which topology a spec is; code
// that needs to know asks the row's facts (s.row().routed, .tunnel, …).
//
// Every fact must be answered: yes/no facts are yesNo (zero = forgotten),
// the others are values or functions with an explicit "none" (noTunnel,
// noFastpath, probeNothing, notMetered), so TestTopologyRowsComplete
// fails for a row that misses one instead of the row meaning "no".

// Topology kinds. Each preset is one of these with its default shape.
const (
	TopoHost            = "host"
	TopoVeth            = "veth"
	TopoBridge          = "bridge"
	TopoMacvlan         = "macvlan"
	TopoNative          = "native"
	TopoVXLAN           = "vxlan"
	TopoGeneve          = "geneve"
	TopoIPIP            = "ipip"
	TopoOVSNetdev       = "ovs-netdev"
	TopoOVSNetdevGeneve = "ovs-netdev-geneve"
	TopoOVSDPDK         = "ovs-dpdk"
	TopoOVNOverlay      = "ovn-overlay"
	TopoOVNUnderlay     = "ovn-underlay"
)

// yesNo is a yes/no fact of a topology. Its zero value is no answer at
// all, which TestTopologyRowsComplete refuses: a row must say no.
type yesNo uint8

const (
	_ yesNo = iota
	no
	yes
)

// shape is a topology's default size.
type shape struct {
	// nodes counts node namespaces: 0 (pods only), 1 (one node holding a
	// bridge, a macvlan parent or a switch) or 2 (two nodes on an underlay).
	nodes int
	// pods counts the pods of each node (of the lab, without nodes),
	// client and server included.
	pods int
}

// mtuCap is the largest pod MTU a topology can carry, and why.
type mtuCap struct {
	max int
	why string
}

// anyMTU is the mtu knob's own ceiling: the topology adds none.
var anyMTU = mtuCap{max: 65535, why: "the largest MTU Linux takes"}

// topology is one preset's facts.
type topology struct {
	name string
	// help is the one line `cnibench lab up --help` and the docs show.
	help  string
	shape shape
	// nodesKnob: the nodes knob (1 or 2) changes the shape — the bridge
	// becomes one L2 segment spanning two nodes.
	nodesKnob yesNo
	// podsKnob: the pods_per_node knob changes the shape.
	podsKnob yesNo
	// routed: pod traffic is routed through node namespaces (forwarding
	// on, journaled), so conntrack, kube-proxy's rules and policies go in
	// the nodes, as they would on a Kubernetes node.
	routed yesNo
	// loopback: client and server share one namespace over lo, so there
	// is no pod interface for the mtu and offloads knobs to set.
	loopback yesNo
	// services: a Service VIP can be put on the client's path (the
	// services knob).
	services yesNo
	// netfilter: the conntrack and notrack knobs are offered (rules in the
	// routing nodes, or on the server pod's input).
	netfilter yesNo
	// podMTU caps the mtu knob where the datapath cannot carry more.
	podMTU mtuCap
	// tunnel is the encapsulation between the nodes: its overhead comes
	// off the underlay MTU for the pods, and a kernel tunnel names the
	// device and kernel option it needs (tunnel.go).
	tunnel *tunnel
	// probe checks, before anything is created, that the host can build
	// it (kernel features, installed daemons), in a throwaway namespace
	// named for the lab id where it needs one.
	probe func(ctx context.Context, s *Spec, id string) error
	// layout names the pods, their addresses and the nodes' endpoint
	// addresses (plan.go), before anything touches the kernel.
	layout func(lo *layout, s *Spec, id string)
	// build creates the topology's objects in the lab's namespaces.
	build func(b *builder, ctx context.Context) error
	// privateOVS: each node namespace runs its own ovsdb-server and
	// ovs-vswitchd under the lab's directory (never the host's OVS).
	privateOVS yesNo
	// hostOVS: the host's Open vSwitch switches the lab's ports (the
	// ovs_sock_buf knob works through its packet sockets).
	hostOVS yesNo
	// dpdk: the switch is OVS-DPDK, with its settings (ovsdpdk_spec.go)
	// and knobs.
	dpdk yesNo
	// ovn: real OVN programs the nodes' switches (ovn.go): Services,
	// NetworkPolicies and skipped conntrack are written into its
	// northbound database as Kube-OVN writes them, and its switches can
	// run on DPDK (the dpdk knob).
	ovn yesNo
	// fastpath says where the eBPF fast path attaches on the nodes
	// (fastpath.go), or noFastpath.
	fastpath *fastpathHook
	// changesHost: the lab affects the whole host while it is up, so an
	// experiment builds it only for its own steps.
	changesHost yesNo
	// meter measures the userspace datapath daemons' CPU during a step
	// (ovsdpdk_meter.go); notMetered where no daemon is measured (the
	// kernel datapaths have none).
	meter func(l *Lab) *DatapathMeter
}

// topologies is the registry, in the order presets are listed.
var topologies = []*topology{
	{
		name: TopoHost, help: "client and server in one namespace over loopback",
		shape: shape{nodes: 0, pods: 2}, nodesKnob: no, podsKnob: no,
		routed: no, loopback: yes, services: no, netfilter: yes, podMTU: anyMTU,
		tunnel: noTunnel, probe: probeNothing, layout: loopbackLayout, build: (*builder).buildLoopback,
		privateOVS: no, hostOVS: no, dpdk: no, ovn: no, fastpath: noFastpath, changesHost: no, meter: notMetered,
	},
	{
		name: TopoVeth, help: "two pod namespaces joined by one veth pair",
		shape: shape{nodes: 0, pods: 2}, nodesKnob: no, podsKnob: no,
		routed: no, loopback: no, services: yes, netfilter: yes, podMTU: anyMTU,
		tunnel: noTunnel, probe: probeNothing, layout: vethLayout, build: (*builder).buildVeth,
		privateOVS: no, hostOVS: no, dpdk: no, ovn: no, fastpath: noFastpath, changesHost: no, meter: notMetered,
	},
	{
		name: TopoBridge, help: "pods on a Linux bridge in a node namespace (L2 / underlay mode)",
		shape: shape{nodes: 1, pods: 2}, nodesKnob: yes, podsKnob: yes,
		routed: no, loopback: no, services: yes, netfilter: yes, podMTU: anyMTU,
		tunnel: noTunnel, probe: probeNothing, layout: podGrid(bridgePrefix, true, bridgeNodeIP), build: (*builder).buildBridge,
		privateOVS: no, hostOVS: no, dpdk: no, ovn: no, fastpath: switchedFastpath, changesHost: no, meter: notMetered,
	},
	{
		name: TopoMacvlan, help: "pods on macvlan (bridge mode) sub-interfaces of a node's link",
		shape: shape{nodes: 1, pods: 2}, nodesKnob: no, podsKnob: yes,
		routed: no, loopback: no, services: yes, netfilter: yes, podMTU: anyMTU,
		// The pods' eth0 are macvlan devices: no host-side veth end.
		tunnel: noTunnel, probe: probeNothing, layout: podGrid(prefixOf(24), false, nil), build: (*builder).buildMacvlan,
		privateOVS: no, hostOVS: no, dpdk: no, ovn: no, fastpath: noFastpath, changesHost: no, meter: notMetered,
	},
	routedTopology(TopoNative, "two nodes on an underlay link, pods routed by /32 routes, no encapsulation",
		noTunnel, probeNothing, routedFastpath),
	// Every kernel this was built for has VXLAN: not probed, so that the
	// most used preset comes up without a throwaway namespace.
	routedTopology(TopoVXLAN, "two nodes with a VXLAN overlay over the underlay link",
		vxlanTunnel, probeNothing, tunnelFastpath),
	routedTopology(TopoGeneve, "two nodes with a kernel GENEVE overlay (needs CONFIG_GENEVE)",
		geneveTunnel, probeKernelTunnel, noFastpath),
	routedTopology(TopoIPIP, "two nodes with an IP-in-IP tunnel (needs CONFIG_NET_IPIP)",
		ipipTunnel, probeKernelTunnel, noFastpath),
	{
		name: TopoOVSNetdev, help: "two pods on an Open vSwitch bridge with datapath_type=netdev",
		shape: shape{nodes: 0, pods: 2}, nodesKnob: no, podsKnob: no,
		routed: no, loopback: no, services: yes, netfilter: yes, podMTU: anyMTU,
		tunnel: noTunnel, probe: probeOVSTools, layout: ovsNetdevLayout, build: (*builder).buildOVSNetdev,
		privateOVS: no, hostOVS: yes, dpdk: no, ovn: no, fastpath: noFastpath, changesHost: no, meter: hostVswitchdMeter,
	},
	{
		name: TopoOVSNetdevGeneve, help: "two OVS netdev bridges as two nodes with a userspace GENEVE tunnel",
		shape: shape{nodes: 2, pods: 1}, nodesKnob: no, podsKnob: no,
		routed: no, loopback: no, services: no, netfilter: yes, podMTU: anyMTU,
		tunnel: ovsGeneveTunnel, probe: probeOVSTools, layout: ovsGeneveLayout, build: (*builder).buildOVSNetdevGeneve,
		privateOVS: yes, hostOVS: no, dpdk: no, ovn: no, fastpath: noFastpath, changesHost: no, meter: privateVswitchdMeter,
	},
	{
		name: TopoOVSDPDK, help: "two pods on a private OVS-DPDK bridge (PMD threads, af_packet ports; needs openvswitch-switch-dpdk)",
		shape: shape{nodes: 1, pods: 2}, nodesKnob: no, podsKnob: no,
		// The lab is seed 003's switch alone: the nftables knobs were
		// never offered on it (its pods have no routing node).
		routed: no, loopback: no, services: no, netfilter: no, podMTU: mtuCap{max: dpdkMaxMTU, why: "the af_packet ports' 2 KiB frames"},
		tunnel: noTunnel, probe: probeOVSDPDK, layout: ovsDPDKLayout, build: (*builder).buildOVSDPDK,
		// Its PMD spins a whole CPU (without pmd_sleep): every other lab
		// measured meanwhile would feel it, hugepages held or not.
		privateOVS: yes, hostOVS: no, dpdk: yes, ovn: no, fastpath: noFastpath, changesHost: yes, meter: privateVswitchdMeter,
	},
	ovnTopology(TopoOVNOverlay, "real OVN (Kube-OVN's shape): two nodes, one logical switch, a userspace GENEVE (or VXLAN) tunnel; needs ovn-central ovn-host",
		ovnOverlayTunnel),
	ovnTopology(TopoOVNUnderlay, "real OVN: the same switch bridged to the node network through a localnet port, routed by the logical gateway; needs ovn-central ovn-host",
		noTunnel),
}

// ovnTopology is the row of a real-OVN preset: two nodes, each with its
// own ovsdb-server, ovs-vswitchd (userspace datapath) and ovn-controller,
// and a central namespace with the northbound and southbound databases
// and ovn-northd; two pods per node on Kube-OVN's default subnet.
func ovnTopology(name, help string, tun *tunnel) *topology {
	return &topology{
		name: name, help: help,
		shape: shape{nodes: 2, pods: 2}, nodesKnob: no, podsKnob: no,
		// Pod traffic never meets a node's netfilter: OVN's logical
		// pipelines (conntrack in the userspace datapath) are the path.
		routed: no, loopback: no, services: yes, netfilter: no, podMTU: anyMTU,
		tunnel: tun, probe: probeOVN, layout: ovnLayout, build: (*builder).buildOVN,
		// With dpdk=on its PMDs spin (Lab.ChangesHost says so from the spec).
		privateOVS: yes, hostOVS: no, dpdk: no, ovn: yes, fastpath: noFastpath, changesHost: no, meter: privateVswitchdMeter,
	}
}

// routedTopology is the row of a topology whose two nodes route their
// pods' traffic (Calico's scheme: /32 routes, a pinned gateway), over the
// underlay or through a kernel tunnel: native and the overlays differ only
// in the facts given here.
func routedTopology(name, help string, tun *tunnel, probe func(context.Context, *Spec, string) error, fp *fastpathHook) *topology {
	return &topology{
		name: name, help: help,
		shape: shape{nodes: 2, pods: 1}, nodesKnob: no, podsKnob: yes,
		routed: yes, loopback: no, services: yes, netfilter: yes, podMTU: anyMTU,
		tunnel: tun, probe: probe, layout: podGrid(prefixOf(32), true, nodeIP), build: (*builder).buildRouted,
		privateOVS: no, hostOVS: no, dpdk: no, ovn: no, fastpath: fp, changesHost: no, meter: notMetered,
	}
}

// topologyIndex finds a row by name. It is filled by init, not by an
// initializer: the rows refer to builders that look rows up, which Go's
// initialization order would call a cycle.
var topologyIndex map[string]*topology

func init() {
	topologyIndex = make(map[string]*topology, len(topologies))
	for _, t := range topologies {
		topologyIndex[t.name] = t
	}
}

// lookupTopology returns the row of a preset name.
func lookupTopology(name string) (*topology, error) {
	if t, ok := topologyIndex[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("unknown preset %q (presets: %s)", name, strings.Join(Presets(), ", "))
}

// Presets returns the preset names in a stable order.
func Presets() []string {
	out := make([]string, len(topologies))
	for i, t := range topologies {
		out[i] = t.name
	}
	return out
}

// PresetHelp returns a one-line description of a preset ("" if unknown).
func PresetHelp(name string) string {
	if t, ok := topologyIndex[name]; ok {
		return t.help
	}
	return ""
}

// defaults is the row's spec before any knob: its shape, and the DPDK
// switch's settings where it has one.
func (t *topology) defaults() *Spec {
	s := &Spec{Topology: t.name, Nodes: t.shape.nodes, PodsPerNode: t.shape.pods}
	if t.dpdk == yes {
		s.DPDK = defaultDPDK()
	}
	if t.ovn == yes {
		s.OVN = &OVNSpec{}
		if t.tunnel != noTunnel {
			s.OVN.Tunnel = "geneve" // Kube-OVN's default network type
		}
	}
	return s
}
