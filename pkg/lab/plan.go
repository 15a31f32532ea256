package lab

import (
	"fmt"
	"net"
	"path/filepath"

	"github.com/cnibench/cnibench/pkg/runid"
)

// Addresses. Pods live in 10.244.<node>.0/24 (like a Kubernetes pod CIDR per
// node); nodes on the underlay 172.31.0.0/24; tunnel interfaces in
// 10.245.0.0/24; service VIPs in 10.96.0.0/16. They exist only inside the
// lab's namespaces, so two labs can use the same ones at once.
const underlayPrefix = 24

// gatewayIP is the pods' default gateway on routed topologies; the node side
// of each pod veth carries gatewayMAC, pinned in the pod's neighbour table
// (Calico's scheme: no per-pod gateway address, no proxy ARP needed).
var (
	gatewayIP  = net.IPv4(169, 254, 1, 1).To4()
	gatewayMAC = net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}
)

func podIP(node, idx int) net.IP { return net.IPv4(10, 244, byte(node), byte(10+idx)).To4() }
func nodeIP(node int) net.IP     { return net.IPv4(172, 31, 0, byte(node)).To4() }
func tunIP(node int) net.IP      { return net.IPv4(10, 245, 0, byte(node)).To4() }
func podCIDR(node int) *net.IPNet {
	return &net.IPNet{IP: net.IPv4(10, 244, byte(node), 0).To4(), Mask: net.CIDRMask(24, 32)}
}

// pod is one pod namespace in a layout.
type pod struct {
	endpoint string
	netns    string
	ip       net.IP
	prefix   int // address prefix length on eth0
	node     int // 1-based; 0 = no node namespace
	idx      int // index on its node
	hostIf   string
	// lsw is the OVN logical switch of a pod of an OVN topology.
	lsw *ovnSubnet
}

// layout is the deterministic shape of a lab: every name and address,
// computed from the spec and the id before anything touches the kernel.
type layout struct {
	pods      []pod
	nodeNS    []string // index 0 = node1
	hostLinks []string
	ovsBr     []string
	// daemonNS are namespaces that hold daemons but neither a node nor a
	// pod (OVN's central databases and ovn-northd), each with its private
	// run directory.
	daemonNS []string
	// nodeIPs are the nodes' endpoint addresses (node1 first), set where
	// the lab has two nodes that are endpoints.
	nodeIPs  []net.IP
	podMTU   int
	underMTU int
}

// endpoints returns the server and the client pod.
func (lo *layout) endpoints() (server, client pod) {
	for _, p := range lo.pods {
		switch p.endpoint {
		case "server":
			server = p
		case "client":
			client = p
		}
	}
	return server, client
}

func (lo *layout) namespaces() []string {
	var out []string
	out = append(out, lo.nodeNS...)
	out = append(out, lo.daemonNS...)
	seen := map[string]bool{}
	for _, p := range lo.pods {
		if !seen[p.netns] {
			seen[p.netns] = true
			out = append(out, p.netns)
		}
	}
	return out
}

func mustIf(id, suffix string) string {
	n, err := runid.IfName(id, suffix)
	if err != nil {
		panic(err) // suffixes are ours and short; a long one is a bug
	}
	return n
}

func makeLayout(s *Spec, id string) *layout {
	t := s.row()
	lo := &layout{underMTU: s.UnderlayMTU}
	if lo.underMTU == 0 {
		lo.underMTU = 1500
	}
	lo.podMTU = s.MTU
	if lo.podMTU == 0 {
		lo.podMTU = lo.underMTU - t.tunnel.overhead - s.ovnMTUMargin()
		if s.DPDK != nil {
			lo.podMTU = min(lo.podMTU, dpdkMaxMTU)
		}
	}
	for n := 1; n <= s.Nodes; n++ {
		lo.nodeNS = append(lo.nodeNS, runid.Name(id, fmt.Sprintf("node%d", n)))
	}
	t.layout(lo, s, id)
	return lo
}

// The layouts of the topology rows: each fills in the pods (and, where
// the nodes are endpoints, their addresses) of a layout whose MTUs and
// node namespaces makeLayout set.

// loopbackLayout: client and server in one namespace, over lo.
func loopbackLayout(lo *layout, _ *Spec, id string) {
	ns := runid.Name(id, "host")
	lo.pods = []pod{{endpoint: "client", netns: ns, ip: net.IPv4(127, 0, 0, 1).To4(), prefix: 8},
		{endpoint: "server", netns: ns, ip: net.IPv4(127, 0, 0, 1).To4(), prefix: 8}}
}

// vethLayout: two pod namespaces on one /24.
func vethLayout(lo *layout, _ *Spec, id string) {
	lo.pods = []pod{{endpoint: "client", netns: runid.Name(id, "client"), ip: podIP(1, 0), prefix: 24},
		{endpoint: "server", netns: runid.Name(id, "server"), ip: podIP(1, 1), prefix: 24}}
}

// ovsNetdevLayout: the addresses of the Open vSwitch userspace UDP tuning
// document; the pods' host ends and the bridge are in the host namespace.
func ovsNetdevLayout(lo *layout, _ *Spec, id string) {
	lo.pods = []pod{
		{endpoint: "client", netns: runid.Name(id, "client"), ip: net.IPv4(10, 15, 2, 7).To4(), prefix: 24, hostIf: mustIf(id, "c")},
		{endpoint: "server", netns: runid.Name(id, "server"), ip: net.IPv4(10, 15, 2, 3).To4(), prefix: 24, hostIf: mustIf(id, "s")}}
	lo.hostLinks = []string{mustIf(id, "c"), mustIf(id, "s")}
	lo.ovsBr = []string{mustIf(id, "br")}
}

// ovsGeneveLayout: one pod per node on one /16; each node runs its own
// Open vSwitch inside its namespace (see privOVS).
func ovsGeneveLayout(lo *layout, _ *Spec, id string) {
	lo.pods = []pod{
		{endpoint: "client", netns: runid.Name(id, "client"), ip: podIP(1, 0), prefix: 16, node: 1, hostIf: mustIf(id, "c")},
		{endpoint: "server", netns: runid.Name(id, "server"), ip: podIP(2, 0), prefix: 16, node: 2, hostIf: mustIf(id, "s")}}
	lo.nodeIPs = []net.IP{nodeIP(1), nodeIP(2)}
}

// ovsDPDKLayout: ovs-netdev's pods and addresses; the switch runs
// privately in node1, where the pods' host ends are too (ovsdpdk.go).
func ovsDPDKLayout(lo *layout, _ *Spec, id string) {
	lo.pods = []pod{
		{endpoint: "client", netns: runid.Name(id, "client"), ip: net.IPv4(10, 15, 2, 7).To4(), prefix: 24, node: 1, hostIf: mustIf(id, "c")},
		{endpoint: "server", netns: runid.Name(id, "server"), ip: net.IPv4(10, 15, 2, 3).To4(), prefix: 24, node: 1, idx: 1, hostIf: mustIf(id, "s")}}
}

// ovnLayout: two pods per node on Kube-OVN's default subnet, pod i of
// node n at 10.16.n.(10+i)/16 — client (node1) and server (node2) cross
// the nodes, pod1-1 is the client's neighbour on node1 (same node), pod2-1
// the server's —, and with router=on a pod per node on subnet2 behind the
// logical router (routed1, routed2 at 10.17.n.10). The nodes' underlay
// addresses are on their physical bridges; central holds the databases.
func ovnLayout(lo *layout, s *Spec, id string) {
	for n := 1; n <= 2; n++ {
		for i := 0; i < 2; i++ {
			ep := fmt.Sprintf("pod%d-%d", n, i)
			if i == 0 {
				ep = map[int]string{1: "client", 2: "server"}[n]
			}
			lo.pods = append(lo.pods, pod{endpoint: ep, netns: runid.Name(id, ep), ip: net.IPv4(10, 16, byte(n), byte(10+i)).To4(),
				prefix: 16, node: n, idx: i, hostIf: mustIf(id, fmt.Sprintf("h%d", i)), lsw: &ovnDefaultSubnet})
		}
	}
	if s.OVN != nil && s.OVN.Router {
		for n := 1; n <= 2; n++ {
			ep := fmt.Sprintf("routed%d", n)
			lo.pods = append(lo.pods, pod{endpoint: ep, netns: runid.Name(id, ep), ip: net.IPv4(10, 17, byte(n), 10).To4(),
				prefix: 16, node: n, idx: 2, hostIf: mustIf(id, "h2"), lsw: &ovnSecondSubnet})
		}
	}
	lo.nodeIPs = []net.IP{nodeIP(1), nodeIP(2)}
	lo.daemonNS = []string{runid.Name(id, "central")}
}

// podGrid lays out pods_per_node pods on each node, pod i of node n at
// 10.244.n.(10+i) with the prefix the spec's shape gives; the client is
// node1's first pod, the server node2's first (or node1's second on one
// node). veth gives each pod a node-side veth end; nodeAddr, with two
// nodes, makes the nodes endpoints at those addresses.
func podGrid(prefix func(s *Spec) int, veth bool, nodeAddr func(node int) net.IP) func(*layout, *Spec, string) {
	return func(lo *layout, s *Spec, id string) {
		for n := 1; n <= s.Nodes; n++ {
			for i := 0; i < s.PodsPerNode; i++ {
				ep := fmt.Sprintf("pod%d-%d", n, i)
				switch {
				case n == 1 && i == 0:
					ep = "client"
				case (s.Nodes == 2 && n == 2 && i == 0) || (s.Nodes < 2 && n == 1 && i == 1):
					ep = "server"
				}
				p := pod{endpoint: ep, netns: runid.Name(id, ep), ip: podIP(n, i), prefix: prefix(s), node: n, idx: i}
				if veth {
					p.hostIf = mustIf(id, fmt.Sprintf("h%d", i))
				}
				lo.pods = append(lo.pods, p)
			}
		}
		if s.Nodes == 2 && nodeAddr != nil {
			lo.nodeIPs = []net.IP{nodeAddr(1), nodeAddr(2)}
		}
	}
}

// prefixOf is a pod prefix length that does not depend on the shape.
func prefixOf(bits int) func(*Spec) int { return func(*Spec) int { return bits } }

// bridgePrefix: a /24 per node, or one /16 when the segment spans two.
func bridgePrefix(s *Spec) int {
	if s.Nodes == 2 {
		return 16
	}
	return 24
}

// plan turns a spec into the lab's state before anything is built.
func plan(s *Spec, id, name string) *Lab {
	t := s.row()
	lo := makeLayout(s, id)
	l := &Lab{Name: name, ID: id, Preset: s.Topology, Spec: s, Knobs: s.Knobs(),
		Endpoints: map[string]Endpoint{}, Namespaces: lo.namespaces(),
		HostLinks: lo.hostLinks, OVSBridges: lo.ovsBr, Pods: len(lo.pods)}
	if t.privateOVS == yes {
		for _, ns := range append(lo.nodeNS, lo.daemonNS...) {
			l.PrivateOVS = append(l.PrivateOVS, filepath.Join(privOVSRoot, ns))
		}
	}
	if t.loopback != yes {
		l.PodMTU = lo.podMTU
	}
	for _, p := range lo.pods {
		l.Endpoints[p.endpoint] = Endpoint{Name: p.endpoint, Kind: "pod", Netns: p.netns, IP: p.ip.String()}
	}
	for i, ip := range lo.nodeIPs {
		e := fmt.Sprintf("node%d", i+1)
		l.Endpoints[e] = Endpoint{Name: e, Kind: "node", Netns: lo.nodeNS[i], IP: ip.String()}
	}
	if s.Services > 0 {
		l.ServiceIP = serviceVIP(s.Services - 1).String()
		// "service" is the server reached through its Service VIP: the
		// server listens in its own namespace, the client dials the VIP.
		srv := l.Endpoints["server"]
		l.Endpoints["service"] = Endpoint{Name: "service", Kind: "service", Netns: srv.Netns, IP: l.ServiceIP}
	}
	return l
}

// bridgeNodeIP is a node's own address on a two-node bridge segment.
func bridgeNodeIP(node int) net.IP { return net.IPv4(10, 244, byte(node), 1).To4() }

// serviceCIDR holds every service VIP (Kubernetes' default service CIDR size).
var serviceCIDR = &net.IPNet{IP: net.IPv4(10, 96, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}

// serviceVIP is the i-th service VIP (10.96.0.10, 10.96.0.11, ...).
func serviceVIP(i int) net.IP {
	v := 10 + i
	return net.IPv4(10, 96, byte(v/256), byte(v%256)).To4()
}
