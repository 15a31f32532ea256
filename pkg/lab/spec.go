package lab

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

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
)

var presetOrder = []string{TopoHost, TopoVeth, TopoBridge, TopoMacvlan, TopoNative, TopoVXLAN,
	TopoGeneve, TopoIPIP, TopoOVSNetdev, TopoOVSNetdevGeneve, TopoOVSDPDK}

// presetHelp is one line per preset, shown by `cnibench lab up --help` and docs.
var presetHelp = map[string]string{
	TopoHost:            "client and server in one namespace over loopback",
	TopoVeth:            "two pod namespaces joined by one veth pair",
	TopoBridge:          "pods on a Linux bridge in a node namespace (L2 / underlay mode)",
	TopoMacvlan:         "pods on macvlan (bridge mode) sub-interfaces of a node's link",
	TopoNative:          "two nodes on an underlay link, pods routed by /32 routes, no encapsulation",
	TopoVXLAN:           "two nodes with a VXLAN overlay over the underlay link",
	TopoGeneve:          "two nodes with a kernel GENEVE overlay (needs CONFIG_GENEVE)",
	TopoIPIP:            "two nodes with an IP-in-IP tunnel (needs CONFIG_NET_IPIP)",
	TopoOVSNetdev:       "two pods on an Open vSwitch bridge with datapath_type=netdev",
	TopoOVSNetdevGeneve: "two OVS netdev bridges as two nodes with a userspace GENEVE tunnel",
	TopoOVSDPDK:         "two pods on a private OVS-DPDK bridge (PMD threads, af_packet ports; needs openvswitch-switch-dpdk)",
}

// Presets returns the preset names in a stable order.
func Presets() []string { return append([]string(nil), presetOrder...) }

// PresetHelp returns a one-line description of a preset ("" if unknown).
func PresetHelp(name string) string { return presetHelp[name] }

// Spec is a topology as pure data: what to build, nothing built yet. Presets
// and YAML files produce a Spec; Set changes one knob; Up turns it into a Lab.
type Spec struct {
	// Topology is the preset kind (one of Presets()).
	Topology string `json:"topology"`
	// Nodes is the number of emulated nodes: 2 for the routed and tunnel
	// presets, 1 or 2 for bridge (2 = one L2 segment spanning both nodes),
	// 0 where there is no node namespace.
	Nodes int `json:"nodes"`
	// PodsPerNode counts every pod on a node, client and server included.
	PodsPerNode int `json:"pods_per_node"`

	MTU         int       `json:"mtu,omitempty"`          // pod interface MTU; 0 = topology default
	UnderlayMTU int       `json:"underlay_mtu,omitempty"` // underlay link MTU; 0 = 1500
	Offloads    []Offload `json:"offloads,omitempty"`     // ethtool features on pod and host-side veths
	Conntrack   bool      `json:"conntrack,omitempty"`    // stateful nftables rule on the path
	// Fastpath is "ebpf" for cnibench's eBPF host routing on the nodes
	// (pkg/fastpath), "" for the kernel's own routing.
	Fastpath    string       `json:"fastpath,omitempty"`
	Notrack     []*net.IPNet `json:"-"` // nftables notrack for these destinations
	NotrackText string       `json:"notrack,omitempty"`
	Services    int          `json:"services,omitempty"` // N DNAT service VIPs on the client's side
	// Proxy programs the services as kube-proxy does on every node:
	// "iptables" or "nftables" (kubeproxy.go); "" keeps the plain linear
	// nftables DNAT list of the services knob.
	Proxy     string `json:"proxy,omitempty"`
	Endpoints int    `json:"endpoints,omitempty"` // endpoints per service with proxy (default 1)
	// Policies is N NetworkPolicy-style allowed peers on the server pod's
	// ingress in its node (policy.go), in PolicyMode "linear" or "set".
	Policies   int    `json:"policies,omitempty"`
	PolicyMode string `json:"policy_mode,omitempty"`
	RmemMax    int64  `json:"rmem_max,omitempty"` // net.core.rmem_max while the lab is up
	WmemMax    int64  `json:"wmem_max,omitempty"` // net.core.wmem_max while the lab is up
	// OVSSockBuf is the buffer size of Open vSwitch's packet sockets on the
	// lab's ports (ovs-netdev), what other_config:userspace-sock-buf-size
	// sets on OVS builds that have it.
	OVSSockBuf int64 `json:"ovs_sock_buf,omitempty"`
	// DPDK is the ovs-dpdk preset's switch settings (ovsdpdk_spec.go).
	DPDK *DPDKSpec `json:"dpdk,omitempty"`

	// set records the knobs given by the user, for Knobs().
	set map[string]string
}

// Offload is one ethtool feature setting, e.g. {"gro", false}.
type Offload struct {
	Feature string `json:"feature"`
	On      bool   `json:"on"`
}

// offloadFeatures maps the knob's short names to ethtool -K feature names.
var offloadFeatures = map[string]string{
	"gro": "gro", "gso": "gso", "tso": "tso", "tx": "tx", "rx": "rx", "sg": "sg",
	"lro": "lro", "tx-checksum": "tx", "rx-checksum": "rx",
}

// knobHelp is the allowed values of each knob, quoted in errors.
var knobHelp = map[string]string{
	"mtu":           "an integer 576..65535 (pod interface MTU)",
	"underlay_mtu":  "an integer 576..65535 (node-to-node link MTU)",
	"offloads":      "on, off, or a list like gro=off,tso=off (features: gro gso tso tx rx sg lro)",
	"conntrack":     "on or off",
	"fastpath":      "ebpf or off (eBPF host routing on the nodes; native, vxlan, bridge with nodes=2)",
	"notrack":       "a comma-separated list of IPv4 CIDRs, e.g. 10.244.0.0/16",
	"services":      "an integer 0..30000 (service VIPs; with proxy, kube-proxy's rules for them)",
	"proxy":         "iptables or nftables (kube-proxy's rules on every node; needs services, native/vxlan/geneve/ipip)",
	"endpoints":     "an integer 1..10 (endpoints per service, with proxy)",
	"policies":      "an integer 0..10000 (allowed peers on the server pod's ingress; native, vxlan, geneve, ipip)",
	"policy_mode":   "linear or set (how policies are written: one rule per peer, or one set lookup)",
	"rmem_max":      "a byte count 4096..2147483647, e.g. 1073741824",
	"wmem_max":      "a byte count 4096..2147483647, e.g. 1073741824",
	"ovs_sock_buf":  "a byte count 212992..1073741823 (ovs-netdev only)",
	"nodes":         "1 or 2 (bridge only)",
	"pods_per_node": "an integer 1..200 (bridge, macvlan, native, vxlan, geneve, ipip)",
	"pmd_cpus":      "a CPU list such as 1 or 0-1 or 0,1 (ovs-dpdk only: the PMD threads' CPUs, pmd-cpu-mask)",
	"pmd_sleep":     "microseconds 0..10000 (ovs-dpdk only: PMD load-based sleeping, pmd-maxsleep; 0 = never sleep)",
	"userspace_tso": "on or off (ovs-dpdk only: userspace-tso-enable)",
	"hugepages":     "an integer 64..8192 (ovs-dpdk only: 2 MiB hugepages reserved while the lab is up)",
	"ring_frames":   "a power of two 64..8192 (ovs-dpdk only: frames in each af_packet port's receive and transmit ring, DPDK framecnt)",
}

// KnobNames returns the knobs Set accepts, sorted.
func KnobNames() []string {
	var out []string
	for k := range knobHelp {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Preset returns the Spec of a named preset.
func Preset(name string) (*Spec, error) {
	s := &Spec{Topology: name}
	switch name {
	case TopoHost, TopoVeth, TopoOVSNetdev:
		s.PodsPerNode = 2
	case TopoOVSDPDK:
		// One node namespace holds the private switch and the pods' host ends.
		s.Nodes, s.PodsPerNode, s.DPDK = 1, 2, defaultDPDK()
	case TopoBridge, TopoMacvlan:
		s.Nodes, s.PodsPerNode = 1, 2
	case TopoNative, TopoVXLAN, TopoGeneve, TopoIPIP, TopoOVSNetdevGeneve:
		s.Nodes, s.PodsPerNode = 2, 1
	default:
		return nil, fmt.Errorf("unknown preset %q (presets: %s)", name, strings.Join(presetOrder, ", "))
	}
	return s, nil
}

// Knobs returns the knobs set on this spec (key → value as given).
func (s *Spec) Knobs() map[string]string {
	out := map[string]string{}
	for k, v := range s.set {
		out[k] = v
	}
	return out
}

// intKnob is a knob whose value is one integer in lo..hi. fits, when set,
// refuses an in-range value that the spec's topology cannot take; it runs
// after the range check, so a bad number is reported as such first.
type intKnob struct {
	lo, hi int64
	fits   func(s *Spec, n int64) error
	set    func(s *Spec, n int64)
}

// intKnobs holds every integer-valued knob; Set's switch keeps only the
// knobs whose values need their own parsing. The ovs-dpdk integers are in
// setDPDK instead: they check the topology before the value, because a
// spec of another topology has no DPDK settings to put them in.
var intKnobs = map[string]intKnob{
	"mtu":          {576, 65535, nil, func(s *Spec, n int64) { s.MTU = int(n) }},
	"underlay_mtu": {576, 65535, nil, func(s *Spec, n int64) { s.UnderlayMTU = int(n) }},
	"services":     {0, maxServices, nil, func(s *Spec, n int64) { s.Services = int(n) }},
	"endpoints":    {1, maxEndpoints, nil, func(s *Spec, n int64) { s.Endpoints = int(n) }},
	"rmem_max":     {4096, 2147483647, nil, func(s *Spec, n int64) { s.RmemMax = n }},
	"wmem_max":     {4096, 2147483647, nil, func(s *Spec, n int64) { s.WmemMax = n }},
	"policies": {0, maxPolicies, func(s *Spec, n int64) error {
		if n > 0 && !routedTopo(s.Topology) {
			return fmt.Errorf("knob policies: the policy goes in the server's node namespace (native, vxlan, geneve, ipip); topology is %s", s.Topology)
		}
		return nil
	}, func(s *Spec, n int64) { s.Policies = int(n) }},
	"ovs_sock_buf": {212992, 1073741823, func(s *Spec, _ int64) error {
		if s.Topology != TopoOVSNetdev {
			return fmt.Errorf("knob ovs_sock_buf: only the ovs-netdev topology takes it (topology is %s)", s.Topology)
		}
		return nil
	}, func(s *Spec, n int64) { s.OVSSockBuf = n }},
	"nodes": {1, 2, func(s *Spec, _ int64) error {
		if s.Topology != TopoBridge {
			return fmt.Errorf("knob nodes: only the bridge topology takes it (topology is %s)", s.Topology)
		}
		return nil
	}, func(s *Spec, n int64) { s.Nodes = int(n) }},
	"pods_per_node": {1, 200, func(s *Spec, _ int64) error {
		switch s.Topology {
		case TopoBridge, TopoMacvlan, TopoNative, TopoVXLAN, TopoGeneve, TopoIPIP:
			return nil
		}
		return fmt.Errorf("knob pods_per_node: not for topology %s (allowed on bridge, macvlan, native, vxlan, geneve, ipip)", s.Topology)
	}, func(s *Spec, n int64) { s.PodsPerNode = int(n) }},
}

// Set changes one knob, as `--set key=value` would. Unknown keys and bad
// values get an error naming the knob and the allowed values.
func (s *Spec) Set(key, value string) error {
	help, ok := knobHelp[key]
	if !ok {
		return fmt.Errorf("unknown knob %q (knobs: %s)", key, strings.Join(KnobNames(), ", "))
	}
	bad := func() error { return fmt.Errorf("knob %s: bad value %q (allowed: %s)", key, value, help) }
	if k, isInt := intKnobs[key]; isInt {
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil || n < k.lo || n > k.hi {
			return bad()
		}
		if k.fits != nil {
			if err := k.fits(s, n); err != nil {
				return err
			}
		}
		k.set(s, n)
	} else if err := s.setParsed(key, value, help, bad); err != nil {
		return err
	}
	if s.set == nil {
		s.set = map[string]string{}
	}
	s.set[key] = value
	return nil
}

// parseOnOff reads an on/off knob value; ok is false for anything else.
func parseOnOff(v string) (on, ok bool) {
	switch strings.ToLower(v) {
	case "on", "true", "yes", "1":
		return true, true
	case "off", "false", "no", "0":
		return false, true
	}
	return false, false
}

// setParsed sets the knobs that are not in intKnobs: each parses its value
// its own way. bad is Set's error for a value outside knobHelp's.
func (s *Spec) setParsed(key, value, help string, bad func() error) error {
	switch key {
	case "offloads":
		offs, err := parseOffloads(value)
		if err != nil {
			return fmt.Errorf("knob offloads: %v (allowed: %s)", err, help)
		}
		s.Offloads = offs
	case "conntrack":
		on, ok := parseOnOff(value)
		if !ok {
			return bad()
		}
		s.Conntrack = on
	case "fastpath":
		switch strings.ToLower(value) {
		case "ebpf":
			// nodes may come after this knob: bridge is checked in validate.
			if !fastpathTopo(s) && s.Topology != TopoBridge {
				return fmt.Errorf("knob fastpath: needs two node namespaces that carry pod traffic (native, vxlan, or bridge with nodes=2); topology is %s", s.Topology)
			}
			s.Fastpath = FastpathEBPF
		case "off", "none", "":
			s.Fastpath = ""
		default:
			return bad()
		}
	case "notrack":
		var nets []*net.IPNet
		for _, f := range strings.Split(value, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			ip, n, err := net.ParseCIDR(f)
			if err != nil || ip.To4() == nil {
				return bad()
			}
			nets = append(nets, n)
		}
		if len(nets) == 0 {
			return bad()
		}
		s.Notrack, s.NotrackText = nets, value
	case "proxy":
		switch strings.ToLower(value) {
		case ProxyIPTables, ProxyNFTables:
			if !routedTopo(s.Topology) {
				return fmt.Errorf("knob proxy: kube-proxy's rules go in node namespaces that route pod traffic (native, vxlan, geneve, ipip); topology is %s", s.Topology)
			}
			s.Proxy = strings.ToLower(value)
		case "off", "":
			s.Proxy = ""
		default:
			return bad()
		}
	case "policy_mode":
		switch strings.ToLower(value) {
		case PolicyLinear, PolicySet:
			s.PolicyMode = strings.ToLower(value)
		default:
			return bad()
		}
	case "pmd_cpus", "pmd_sleep", "userspace_tso", "hugepages", "ring_frames":
		return s.setDPDK(key, value, bad)
	}
	return nil
}

func parseOffloads(v string) ([]Offload, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "off":
		on := strings.EqualFold(strings.TrimSpace(v), "on")
		return []Offload{{"gro", on}, {"gso", on}, {"tso", on}}, nil
	}
	var out []Offload
	for _, f := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			return nil, fmt.Errorf("bad item %q: want feature=on|off", f)
		}
		feat, known := offloadFeatures[strings.ToLower(k)]
		if !known {
			return nil, fmt.Errorf("unknown feature %q", k)
		}
		switch strings.ToLower(val) {
		case "on":
			out = append(out, Offload{feat, true})
		case "off":
			out = append(out, Offload{feat, false})
		default:
			return nil, fmt.Errorf("feature %s: bad value %q: want on or off", k, val)
		}
	}
	return out, nil
}

// validate checks what only makes sense on the whole spec.
func (s *Spec) validate() error {
	if _, err := Preset(s.Topology); err != nil {
		return err
	}
	if s.Topology == TopoBridge && s.Nodes == 2 && s.PodsPerNode < 1 {
		return fmt.Errorf("pods_per_node: bridge with 2 nodes needs at least 1 pod per node")
	}
	if s.Nodes <= 1 && s.Topology != TopoHost && s.Topology != TopoVeth && s.Topology != TopoOVSNetdev && s.PodsPerNode < 2 {
		return fmt.Errorf("pods_per_node: a one-node %s topology needs at least 2 pods (client and server)", s.Topology)
	}
	if s.Services > 0 && s.Topology == TopoHost {
		return fmt.Errorf("knob services: the host topology has no path to a service (use veth, bridge or a two-node preset)")
	}
	if s.Services > 0 && s.Topology == TopoOVSNetdevGeneve {
		return fmt.Errorf("knob services: not supported on %s", s.Topology)
	}
	if s.Fastpath != "" && !fastpathTopo(s) {
		return fmt.Errorf("knob fastpath: needs two node namespaces that carry pod traffic (native, vxlan, or bridge with nodes=2); topology is %s", s.Topology)
	}
	if s.Proxy != "" && s.Services == 0 {
		return fmt.Errorf("knob proxy: needs services=N (the Services kube-proxy programs)")
	}
	if s.Proxy != "" && !routedTopo(s.Topology) {
		return fmt.Errorf("knob proxy: kube-proxy's rules go in node namespaces that route pod traffic (native, vxlan, geneve, ipip); topology is %s", s.Topology)
	}
	if s.PolicyMode != "" && s.Policies == 0 {
		return fmt.Errorf("knob policy_mode: needs policies=N")
	}
	if s.Policies > 0 && !routedTopo(s.Topology) {
		return fmt.Errorf("knob policies: the policy goes in the server's node namespace (native, vxlan, geneve, ipip); topology is %s", s.Topology)
	}
	if s.Endpoints > 0 && s.Proxy == "" {
		return fmt.Errorf("knob endpoints: only with proxy=iptables or proxy=nftables")
	}
	if len(s.Offloads) > 0 && s.Topology == TopoHost {
		return fmt.Errorf("knob offloads: the host topology has no veth (use veth or another preset)")
	}
	if s.Topology == TopoOVSDPDK {
		if err := s.validateDPDK(); err != nil {
			return err
		}
	}
	if s.MTU > 0 && s.Topology == TopoHost {
		return fmt.Errorf("knob mtu: the host topology uses loopback; its MTU is not a lab knob")
	}
	return nil
}

// fastpathTopo reports whether the eBPF fast path has nodes to run on: the
// routed presets, and the bridge spanning two nodes.
func fastpathTopo(s *Spec) bool {
	switch s.Topology {
	case TopoNative, TopoVXLAN:
		return true
	case TopoBridge:
		return s.Nodes == 2
	}
	return false
}
