package lab

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// Spec is a topology as pure data: what to build, nothing built yet, every
// knob already read into a typed field. Resolve (a preset or a YAML file,
// and knobs) and Preset make one, checked as a whole; Up builds it as it
// is, without checking it again, and refuses a Spec made any other way.
// Its fields are the lab's record (its state file, `lab show --json`):
// read them, change them only through Resolve.
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
	// Fastpath is FastpathEBPF for cnibench's eBPF host routing on the
	// nodes (pkg/fastpath), "" for the kernel's own routing.
	Fastpath FastpathMode `json:"fastpath,omitempty"`
	Notrack  CIDRs        `json:"notrack,omitempty"` // nftables notrack for these destinations
	// The conntrack limits (conntrack_limits.go): nf_conntrack_max, the
	// hash table's buckets, the TCP established and TIME_WAIT timeouts in
	// seconds; 0 = the kernel's value.
	ConntrackMax         int64 `json:"conntrack_max,omitempty"`
	ConntrackBuckets     int64 `json:"conntrack_buckets,omitempty"`
	CTTimeoutEstablished int   `json:"conntrack_timeout_established,omitempty"`
	CTTimeoutTimeWait    int   `json:"conntrack_timeout_time_wait,omitempty"`
	Services             int   `json:"services,omitempty"` // N DNAT service VIPs on the client's side
	// Proxy programs the services as kube-proxy does on every node:
	// ProxyIPTables or ProxyNFTables (kubeproxy.go); "" keeps the plain
	// linear nftables DNAT list of the services knob.
	Proxy     ProxyMode `json:"proxy,omitempty"`
	Endpoints int       `json:"endpoints,omitempty"` // endpoints per service with proxy (default 1)
	// Policies is N NetworkPolicy-style allowed peers on the server pod's
	// ingress in its node (policy.go), written as PolicyMode says.
	Policies   int        `json:"policies,omitempty"`
	PolicyMode PolicyMode `json:"policy_mode,omitempty"`
	RmemMax    int64      `json:"rmem_max,omitempty"` // net.core.rmem_max while the lab is up
	WmemMax    int64      `json:"wmem_max,omitempty"` // net.core.wmem_max while the lab is up
	// OVSSockBuf is the buffer size of Open vSwitch's packet sockets on the
	// lab's ports (ovs-netdev), what other_config:userspace-sock-buf-size
	// sets on OVS builds that have it.
	OVSSockBuf int64 `json:"ovs_sock_buf,omitempty"`
	// DPDK is the ovs-dpdk preset's switch settings (ovsdpdk_spec.go),
	// and the OVN presets' with dpdk=on.
	DPDK *DPDKSpec `json:"dpdk,omitempty"`
	// OVN is the ovn-* presets' logical network (ovn_spec.go).
	OVN *OVNSpec `json:"ovn,omitempty"`

	// given records each knob's text as given, for Knobs(); active, the
	// knobs set to something other than off (for the knobs that need
	// them, and to choose the steps that apply them).
	given  map[string]string
	active map[string]bool
	// source is what Resolve was given: a preset name or a file.
	source string
	// resolved marks a spec Resolve or Preset checked: the only kind Up
	// takes.
	resolved bool
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

// Preset returns the Spec of a named preset with no knob set.
func Preset(name string) (*Spec, error) { return Resolve(name, "", nil) }

// Knobs returns the knobs set on this spec (key → value as given).
func (s *Spec) Knobs() map[string]string {
	out := map[string]string{}
	for k, v := range s.given {
		out[k] = v
	}
	return out
}

// Source is the preset name or topology file the spec was resolved from.
func (s *Spec) Source() string { return s.source }

// row is the spec's topology row; nil only for a spec no Resolve made.
func (s *Spec) row() *topology { return topologyIndex[s.Topology] }

// CIDRs is a list of IPv4 networks, written as "10.244.0.0/16,10.96.0.0/12"
// (the notrack knob's text, and its form in the lab's state file).
type CIDRs []*net.IPNet

// String is the networks comma-separated.
func (c CIDRs) String() string {
	parts := make([]string, len(c))
	for i, n := range c {
		parts[i] = n.String()
	}
	return strings.Join(parts, ",")
}

// MarshalText writes the networks as String does.
func (c CIDRs) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a comma-separated list of at least one IPv4 CIDR;
// spaces and empty items are ignored, host bits are cleared.
func (c *CIDRs) UnmarshalText(b []byte) error {
	var nets CIDRs
	for _, f := range strings.Split(string(b), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		ip, n, err := net.ParseCIDR(f)
		if err != nil || ip.To4() == nil {
			return fmt.Errorf("%q is not an IPv4 CIDR", f)
		}
		nets = append(nets, n)
	}
	if len(nets) == 0 {
		return errors.New("no CIDR")
	}
	*c = nets
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
