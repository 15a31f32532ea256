// Package datapath says which pod network a node runs and how it is set up
// — Cilium (version, routing, tunnel protocol, kube-proxy replacement, host
// routing, masquerading), Flannel (backend) or the reference bridge plugin —
// from what the node itself shows: the agent processes and their flags,
// the network devices, and, given the privilege, the agent's own API. It
// also lists the BPF programs attached on the node (tcx, tc, XDP and cgroup
// hooks, by device and direction), which Debian 12's bpftool cannot show
// for tcx.
//
// Nothing here looks at a CNI configuration file: where it lives and what
// it says varies by distribution and installer (k8slab's Flannel runs the
// bridge plugin's conflist), while the agent and the devices do not lie
// about what carries the packets.
package datapath

import (
	"errors"
	"strings"
)

// ErrMalformed is matched by the readers' errors on input that is not what
// they read (an agent API answer that is not JSON, a subnet file line
// without "="): what the node gave is wrong, not the reader.
var ErrMalformed = errors.New("malformed datapath input")

// ErrInvalid is matched by the errors of a command's flags (an unknown
// network namespace): the user fixes the command line.
var ErrInvalid = errors.New("invalid datapath flags")

// CNI names.
const (
	CNICilium  = "cilium"
	CNIFlannel = "flannel"
	CNIBridge  = "bridge"
)

// Node is one node's pod network as the node shows it.
type Node struct {
	// CNI is cilium, flannel or bridge; "" when nothing known runs.
	CNI string `json:"cni,omitempty"`
	// Mode is how pods reach other nodes: native, vxlan, geneve, host-gw
	// (Flannel's backend); "" when unknown or not applicable.
	Mode    string   `json:"mode,omitempty"`
	Version string   `json:"version,omitempty"`
	Cilium  *Cilium  `json:"cilium,omitempty"`
	Flannel *Flannel `json:"flannel,omitempty"`
	// From says where the answer came from ("agent API", "agent flags and
	// devices", …).
	From string `json:"from,omitempty"`
	// Missing maps a fact that could not be read to why (Cilium's version
	// needs the agent's API, which needs privilege).
	Missing map[string]string `json:"missing,omitempty"`
}

// Seen is what a probe found on a node, the input of Recognize.
type Seen struct {
	// Links are the node's devices as name:kind (cilium_vxlan:vxlan).
	Links []string
	// Agents maps pid to agent name (cilium-agent, flanneld, …) of the
	// agents in the node's network namespace.
	Agents map[int]string
	// Args are the agents' command lines by pid (/proc/<pid>/cmdline is
	// world-readable); a pid without one is fine.
	Args map[int][]string
	// Cilium is the agent's own answer (its API), nil when not asked.
	Cilium *Cilium
	// CiliumErr says why the agent's API gave no answer ("" when it was
	// not asked: no privilege).
	CiliumErr string
	// Flannel is flanneld's own configuration (net-conf, subnet file), nil
	// when not read.
	Flannel *Flannel
}

// Recognize names the node's pod network from what a probe saw: a CNI
// counts only when its agent runs (node annotations and CRDs outlive it);
// the reference bridge plugin has no agent, so a cni0 bridge with none of
// them running is "bridge".
func Recognize(s Seen) Node {
	links := map[string]bool{}
	for _, l := range s.Links {
		links[l] = true
	}
	byName := map[string]int{}
	for pid, a := range s.Agents {
		if old, ok := byName[a]; !ok || pid < old {
			byName[a] = pid
		}
	}
	switch {
	case hasAgent(byName, "cilium-agent"):
		return recognizeCilium(s, links, s.Args[byName["cilium-agent"]])
	case hasAgent(byName, "flanneld"):
		return recognizeFlannel(s, links, s.Args[byName["flanneld"]])
	case links["cni0:bridge"]:
		return Node{CNI: CNIBridge, From: "a cni0 bridge and no CNI agent running"}
	}
	return Node{}
}

func hasAgent(m map[string]int, name string) bool { _, ok := m[name]; return ok }

func recognizeCilium(s Seen, links map[string]bool, args []string) Node {
	n := Node{CNI: CNICilium, Missing: map[string]string{}}
	if s.Cilium != nil {
		c := *s.Cilium
		n.Cilium, n.From = &c, "cilium-agent's API (/v1/healthz, /v1/debuginfo)"
	} else {
		c := CiliumFromNode(args, s.Links)
		n.Cilium, n.From = &c, "cilium-agent's flags and the node's devices"
		why := "needs cilium-agent's API socket (--inspect-datapath)"
		if s.CiliumErr != "" {
			why = s.CiliumErr
		}
		if c.Version == "" {
			n.Missing["version"] = why
		}
		if c.HostRouting == "" {
			n.Missing["host_routing"] = why
		}
		if c.KubeProxyReplacement == nil {
			n.Missing["kube_proxy_replacement"] = why
		}
	}
	n.Version = n.Cilium.Version
	n.Mode = n.Cilium.Mode()
	if len(n.Missing) == 0 {
		n.Missing = nil
	}
	return n
}

func recognizeFlannel(s Seen, links map[string]bool, args []string) Node {
	n := Node{CNI: CNIFlannel, From: "flanneld running, the node's devices"}
	f := Flannel{}
	if s.Flannel != nil {
		f = *s.Flannel
		n.From = "flanneld's net-conf and subnet file"
	}
	f.IPMasq = FlagValue(args, "ip-masq")
	f.Iface = FlagValue(args, "iface")
	if f.Backend == "" && links["flannel.1:vxlan"] {
		// Flannel's VXLAN backend makes flannel.1 (VNI 1); host-gw makes no
		// device, and the others have devices of their own.
		f.Backend = "vxlan"
	}
	n.Flannel, n.Mode = &f, f.Backend
	return n
}

// Summary is the node's pod network in one line: "cilium 1.20.2: tunnel
// vxlan, kube-proxy replaced (socket LB), host routing legacy, masquerade
// iptables, tcx/veth", "flannel vxlan", "bridge".
func (n Node) Summary() string {
	switch {
	case n.CNI == "":
		return "unknown"
	case n.Cilium != nil:
		return n.Cilium.Summary()
	case n.Mode != "":
		return n.CNI + " " + n.Mode
	}
	return n.CNI
}

// FlagValue is the value of --name=value or --name value in args ("" when
// absent); the last occurrence wins, as with Go's and cobra's flag parsers.
func FlagValue(args []string, name string) string {
	v := ""
	for i := 0; i < len(args); i++ {
		a := strings.TrimLeft(args[i], "-")
		if len(a) == len(args[i]) {
			continue // not a flag
		}
		k, val, hasEq := strings.Cut(a, "=")
		if k != name {
			continue
		}
		switch {
		case hasEq:
			v = val
		case i+1 < len(args) && !strings.HasPrefix(args[i+1], "-"):
			v = args[i+1]
			i++
		default:
			v = "true" // a bare boolean flag
		}
	}
	return v
}

// ParseCmdline splits /proc/<pid>/cmdline (NUL-separated) into arguments.
func ParseCmdline(b []byte) []string {
	s := strings.TrimRight(string(b), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}
