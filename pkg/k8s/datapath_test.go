package k8s

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cnibench/cnibench/pkg/datapath"
	"github.com/cnibench/cnibench/pkg/result"
)

func bptr(b bool) *bool { return &b }

// ciliumProbe is a node probe of a Cilium node: its links and agents as
// captured on k8slab, and the agent's answer (deep) or only its flags.
func ciliumProbe(node, kubeProxy string, tunnel bool, kpr *bool, version string) NodeProbe {
	links := []string{"cilium_host:veth", "cilium_net:veth", "eth0:veth", "lo:device", "lxc288e501cb152:veth"}
	c := datapath.Cilium{Version: version, Routing: "native", KubeProxyReplacement: kpr, HostRouting: "legacy", Masquerade: "iptables",
		AttachMode: "tcx", DatapathMode: "veth"}
	if tunnel {
		links = append(links, "cilium_vxlan:vxlan")
		c.Routing, c.Tunnel = "tunnel", "vxlan"
	}
	if kpr != nil && *kpr {
		c.SocketLB = bptr(true)
	}
	agents := []string{"cilium-agent"}
	p := NodeProbe{Node: node, Links: links, Agents: agents}
	if kubeProxy == "" {
		p.KubeProxyError = "no kube-proxy answers on 127.0.0.1:10249 (connect: connection refused)"
	} else {
		p.KubeProxyMode = kubeProxy
		p.Agents = append(p.Agents, "kube-proxy")
	}
	n := datapath.Node{CNI: "cilium", Mode: c.Mode(), Version: version, Cilium: &c, From: "cilium-agent's API"}
	p.Datapath = &n
	return p
}

func TestApplyProbesCilium(t *testing.T) {
	cases := []struct {
		name                   string
		probes                 []NodeProbe
		cni, mode, version, kp string
		summary, hostLabel     string
	}{
		{"vxlan, replacement, no kube-proxy",
			[]NodeProbe{ciliumProbe("n1", "", true, bptr(true), "1.20.2"), ciliumProbe("n2", "", true, bptr(true), "1.20.2")},
			"cilium", "vxlan", "1.20.2", "replaced by Cilium",
			"CNI cilium 1.20.2 (vxlan; tunnel vxlan, kube-proxy replaced (socket LB), host routing legacy, masquerade iptables, tcx/veth), kube-proxy replaced by Cilium",
			"[cilium 1.20.2 vxlan, kube-proxy replaced by Cilium]"},
		{"native, kube-proxy kept",
			[]NodeProbe{ciliumProbe("n1", "iptables", false, bptr(false), "1.20.2"), ciliumProbe("n2", "iptables", false, bptr(false), "1.20.2")},
			"cilium", "native", "1.20.2", "iptables (pods' ClusterIP traffic translated by Cilium first)",
			"kube-proxy not replaced", "[cilium 1.20.2 native, kube-proxy iptables (pods' ClusterIP traffic translated by Cilium first)]"},
		{"replacement beside a running kube-proxy",
			[]NodeProbe{ciliumProbe("n1", "iptables", false, bptr(true), "1.20.2")},
			"cilium", "native", "1.20.2", "iptables (running, but Cilium's replacement serves Services)", "kube-proxy replaced (socket LB)", ""},
		{"unprivileged, flags silent on the replacement",
			[]NodeProbe{ciliumProbe("n1", "", true, nil, "")},
			"cilium", "vxlan", "", "unknown (n1: no kube-proxy answers on 127.0.0.1:10249 (connect: connection refused); cilium-agent runs and may replace it: --inspect-datapath asks it)",
			"CNI cilium (vxlan; tunnel vxlan, host routing legacy", "[cilium vxlan, kube-proxy unknown"},
		{"versions differ",
			[]NodeProbe{ciliumProbe("n1", "", true, bptr(true), "1.20.2"), ciliumProbe("n2", "", true, bptr(true), "1.19.0")},
			"cilium", "vxlan", "n1=1.20.2, n2=1.19.0", "replaced by Cilium", "n1=cilium 1.20.2: tunnel vxlan", "[cilium vxlan, kube-proxy replaced by Cilium]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &Cluster{CNI: cniUnknown, Version: "v1.31.4", Nodes: []NodeInfo{{Name: "n1"}, {Name: "n2"}}}
			c.ApplyProbes(tc.probes, nil)
			if c.CNI != tc.cni || c.CNIMode != tc.mode || c.CNIVersion != tc.version || c.KubeProxyMode != tc.kp {
				t.Errorf("got CNI %q mode %q version %q kube-proxy %q\nwant %q %q %q %q", c.CNI, c.CNIMode, c.CNIVersion, c.KubeProxyMode,
					tc.cni, tc.mode, tc.version, tc.kp)
			}
			if s := c.Summary(); !strings.Contains(s, tc.summary) {
				t.Errorf("Summary %q lacks %q", s, tc.summary)
			}
			run := StoreRun(&Plan{RunID: "t3st", Cluster: c}, Options{}, "v", "")
			if !strings.Contains(run.Host.Hostname, tc.hostLabel) || run.Labels["k8s.cni"] != "cilium" || run.Host.Notes["datapath"] != c.Datapath {
				t.Errorf("stored: host %q (want %q) labels %v notes %v", run.Host.Hostname, tc.hostLabel, run.Labels, run.Host.Notes)
			}
		})
	}
}

// TestApplyProbesOldProbes: a probe line without the datapath field (an
// older image) is still read from its links and agents.
func TestApplyProbesOldProbes(t *testing.T) {
	p := ciliumProbe("n1", "", true, nil, "")
	p.Datapath = nil
	c := &Cluster{CNI: cniUnknown}
	c.ApplyProbes([]NodeProbe{p}, nil)
	if c.CNI != "cilium" || c.CNIMode != "vxlan" {
		t.Errorf("got %q %q", c.CNI, c.CNIMode)
	}
	mixed := &Cluster{CNI: cniUnknown}
	fl := NodeProbe{Node: "n2", KubeProxyMode: "iptables", Links: []string{"cni0:bridge", "flannel.1:vxlan"}, Agents: []string{"flanneld", "kube-proxy"}}
	mixed.ApplyProbes([]NodeProbe{p, fl}, []corev1.Node{flannelNode("n2", "vxlan")})
	if !strings.HasPrefix(mixed.CNI, "mixed (n1=cilium ?: tunnel vxlan") || !strings.Contains(mixed.CNI, "n2=flannel vxlan") {
		t.Errorf("two CNIs: %q", mixed.CNI)
	}
}

func TestNodeProbePodPrivilegeOnlyWhenInspecting(t *testing.T) {
	po := PodOptions{RunID: "t3st", Namespace: "cnibench", Image: "img"}
	plain := NodeProbePod(po, "p", "n1", 60, false).Spec.Containers[0]
	if sc := plain.SecurityContext; sc == nil || *sc.RunAsUser != nonRootUID || len(sc.Capabilities.Add) != 0 || strings.Contains(strings.Join(plain.Args, " "), "--deep") {
		t.Errorf("plain probe: %+v args %v", plain.SecurityContext, plain.Args)
	}
	deep := NodeProbePod(po, "p", "n1", 60, true)
	c := deep.Spec.Containers[0]
	sc := c.SecurityContext
	if *sc.RunAsUser != 0 || strings.Join(capNames(sc.Capabilities.Add), ",") != "SYS_PTRACE,SYS_ADMIN,NET_ADMIN" ||
		len(sc.Capabilities.Drop) != 1 || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !deep.Spec.HostPID || !deep.Spec.HostNetwork {
		t.Errorf("deep probe: %+v hostPID %v hostNetwork %v", sc, deep.Spec.HostPID, deep.Spec.HostNetwork)
	}
	if strings.Join(c.Args, " ") != "k8s node-info --deep" {
		t.Errorf("deep args %v", c.Args)
	}
}

func capNames(cs []corev1.Capability) []string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c))
	}
	return out
}

// TestStampDatapath: each result carries the pod network of the node each
// side ran on.
func TestStampDatapath(t *testing.T) {
	c := &Cluster{Probes: []NodeProbe{ciliumProbe("n1", "", true, bptr(true), "1.20.2"), {Node: "n2", Error: "image pull error"}}}
	r := result.New(result.Tool{Name: "cnibench"}, result.TCPLat, 1)
	r.Env = result.Env{Client: &result.Fingerprint{Hostname: "cli"}, Server: &result.Fingerprint{Hostname: "srv"}}
	s := Sample{Step: Step{Placement: Placement{Scenario: "pod-cross-node", ClientNode: "n1", ServerNode: "n2"}}, Results: []*result.Result{r}}
	c.stampDatapath(&s)
	n := r.Env.Client.Notes
	if n["node"] != "n1" || !strings.HasPrefix(n["datapath"], "cilium 1.20.2: tunnel vxlan") || n["kube_proxy"] != "none answering" {
		t.Errorf("client notes %v", n)
	}
	if r.Env.Server.Notes != nil {
		t.Errorf("server's node was not probed, yet notes %v", r.Env.Server.Notes)
	}
	// A tool's result has no fingerprint: it gets one with the node's.
	tool := result.New(result.Tool{Name: "qperf"}, result.TCPLat, 1)
	s = Sample{Step: Step{Placement: Placement{Scenario: "pod-same-node", ClientNode: "n1", ServerNode: "n1"}}, Results: []*result.Result{tool}}
	c.stampDatapath(&s)
	if tool.Env.Client == nil || tool.Env.Client.Hostname != "n1" || tool.Env.Server.Notes["kube_proxy"] != "none answering" {
		t.Errorf("tool result env %+v", tool.Env)
	}
}

// TestInfoProbe: `k8s info --probe` runs a probe pod on every Ready node,
// folds what they say and removes what it created.
func TestInfoProbe(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	p := ciliumProbe("", "", true, bptr(true), "1.20.2")
	fc.probe = &p
	r := fc.runner()
	cl, nodes, err := Fingerprint(context.Background(), r.Client)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ProbeCluster(context.Background(), cl, nodes, Options{Namespace: "cnibench", Image: "img", ReadyTimeout: shortWait * 10}); err != nil {
		t.Fatal(err)
	}
	if cl.CNI != "cilium" || cl.KubeProxyMode != "replaced by Cilium" || len(cl.Probes) != 2 || cl.Probes[1].Node != "n2" {
		t.Errorf("probed: %+v", cl)
	}
	var b strings.Builder
	if err := cl.WriteNodes(&b); err != nil || !strings.Contains(b.String(), "n2: cilium 1.20.2: tunnel vxlan") {
		t.Errorf("WriteNodes: %v\n%s", err, b.String())
	}
	fc.wantClean(t)
}

// TestInfoWithoutProbes: without asking the nodes, a CNI named only by
// node annotations is said to be so (they outlive the agent: k8slab after
// a switch from Flannel back to the bridge plugin), one named by a
// kube-system workload is not, and nothing named says what would tell.
func TestInfoWithoutProbes(t *testing.T) {
	fc := newFakeCluster(t, "n1")
	ctx := context.Background()
	node, _ := fc.cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	node.Annotations = map[string]string{"flannel.alpha.coreos.com/backend-type": "vxlan"}
	fc.cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	cl, _, err := Fingerprint(ctx, fc.api)
	if err != nil {
		t.Fatal(err)
	}
	cl.markUnprobed()
	if cl.CNI != "flannel (from node annotations only, which outlive the agent; --probe asks the nodes)" {
		t.Errorf("annotations only: %q", cl.CNI)
	}
	byWorkload := &Cluster{CNI: "cilium", cniSource: "cilium"}
	byWorkload.markUnprobed()
	nothing := &Cluster{CNI: cniUnknown}
	nothing.markUnprobed()
	if byWorkload.CNI != "cilium" || !strings.Contains(nothing.CNI, "--probe asks the nodes") {
		t.Errorf("workload %q, nothing %q", byWorkload.CNI, nothing.CNI)
	}
}
