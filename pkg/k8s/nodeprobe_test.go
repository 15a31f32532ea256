package k8s

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func flannelNode(name, backend string) corev1.Node {
	n := *readyNode(name, "10.250.0.2")
	n.Annotations = map[string]string{"flannel.alpha.coreos.com/backend-type": backend, "flannel.alpha.coreos.com/public-ip": "10.250.0.2"}
	return n
}

func TestApplyProbes(t *testing.T) {
	bridge := NodeProbe{KubeProxyMode: "iptables", Links: []string{"cni0:bridge", "eth0:veth"}, Agents: []string{"kube-proxy"}}
	vx := NodeProbe{KubeProxyMode: "nftables", Links: []string{"cni0:bridge", "eth0:veth", "flannel.1:vxlan"}, Agents: []string{"flanneld", "kube-proxy"}}
	hgw := NodeProbe{KubeProxyMode: "iptables", Links: []string{"cni0:bridge", "eth0:veth"}, Agents: []string{"flanneld", "kube-proxy"}}
	cases := []struct {
		name           string
		probes         []NodeProbe
		nodes          []corev1.Node
		startCNI       string
		cni, mode, kpm string
	}{
		{"flannel vxlan, nftables", []NodeProbe{vx, vx}, []corev1.Node{flannelNode("n1", "vxlan")}, "flannel", "flannel", "vxlan", "nftables"},
		{"flannel host-gw", []NodeProbe{hgw, hgw}, []corev1.Node{flannelNode("n1", "host-gw")}, "flannel", "flannel", "host-gw", "iptables"},
		// Flannel's annotations outlive it: after a switch back to the
		// bridge plugin they still say flannel, but nothing runs.
		{"stale flannel annotations", []NodeProbe{bridge, bridge}, []corev1.Node{flannelNode("n1", "vxlan")}, "flannel", "bridge", "", "iptables"},
		{"vxlan annotated, no device", []NodeProbe{hgw}, []corev1.Node{flannelNode("n1", "vxlan")}, "flannel", "flannel", "vxlan? (annotated, but no flannel.1 vxlan device on the probed nodes)", "iptables"},
		{"modes differ", []NodeProbe{{Node: "n1", KubeProxyMode: "iptables"}, {Node: "n2", KubeProxyMode: "nftables"}}, nil, cniUnknown, cniUnknown, "", "n1=iptables, n2=nftables"},
		{"no kube-proxy", []NodeProbe{{Node: "n1", KubeProxyError: "no kube-proxy answers on 127.0.0.1:10249 (connection refused)"}}, nil, cniUnknown, cniUnknown, "",
			"unknown (n1: no kube-proxy answers on 127.0.0.1:10249 (connection refused))"},
		{"probe failed", []NodeProbe{{Node: "n1", Error: "image pull error"}}, []corev1.Node{flannelNode("n1", "vxlan")}, "flannel", "flannel", "", "unknown (n1: image pull error)"},
		// The bridge plugin's cni0 comes with a node's first pod: a node
		// without one yet is no evidence against the bridge (a CI run
		// read "mixed (k8slab-n1=unknown, k8slab-n2=bridge)").
		{"bridge, one node without a pod yet", []NodeProbe{{KubeProxyMode: "iptables", Links: []string{"eth0:veth"}, Agents: []string{"kube-proxy"}}, bridge}, nil, cniUnknown, "bridge", "", "iptables"},
		// An agent CNI's node without the agent is: mixed.
		{"flannel on one node only", []NodeProbe{vx, {KubeProxyMode: "nftables", Links: []string{"eth0:veth"}, Agents: []string{"kube-proxy"}}}, nil, cniUnknown, "mixed (n1=flannel vxlan, n2=unknown)", "", "nftables"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.probes {
				if tc.probes[i].Node == "" {
					tc.probes[i].Node = "n" + string(rune('1'+i))
				}
			}
			c := &Cluster{CNI: tc.startCNI}
			c.ApplyProbes(tc.probes, tc.nodes)
			if c.CNI != tc.cni || c.CNIMode != tc.mode || c.KubeProxyMode != tc.kpm {
				t.Errorf("got CNI %q mode %q kube-proxy %q; want %q %q %q", c.CNI, c.CNIMode, c.KubeProxyMode, tc.cni, tc.mode, tc.kpm)
			}
		})
	}
}

func TestProbeNodeReadsKubeProxyAndAgents(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/proxyMode" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("nftables"))
	}))
	defer srv.Close()
	proc := t.TempDir()
	for pid, comm := range map[string]string{"1": "systemd", "42": "flanneld", "43": "kube-proxy", "44": "flanneld", "self": "x"} {
		os.MkdirAll(filepath.Join(proc, pid), 0o755)
		os.WriteFile(filepath.Join(proc, pid, "comm"), []byte(comm+"\n"), 0o644)
	}
	p := ProbeNode(context.Background(), strings.TrimPrefix(srv.URL, "http://"), proc, false)
	if p.KubeProxyMode != "nftables" || strings.Join(p.Agents, ",") != "flanneld,kube-proxy" {
		t.Errorf("probe %+v", p)
	}
	// Nothing listening: a reason, not a mode.
	srv.Close()
	p = ProbeNode(context.Background(), strings.TrimPrefix(srv.URL, "http://"), proc, false)
	if p.KubeProxyMode != "" || !strings.Contains(p.KubeProxyError, "no kube-proxy answers") {
		t.Errorf("closed port: %+v", p)
	}
}

func TestExecuteStoresProbedFingerprint(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	ctx := context.Background()
	for _, n := range []string{"n1", "n2"} {
		node, _ := fc.cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		node.Annotations = map[string]string{"flannel.alpha.coreos.com/backend-type": "vxlan"}
		fc.cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	}
	fc.probe = &NodeProbe{KubeProxyMode: "nftables", Links: []string{"flannel.1:vxlan"}, Agents: []string{"flanneld", "kube-proxy"}}
	o := testOptions()
	o.Repeats = 1
	var seen *Cluster
	sampled := false
	o.OnProbed = func(c *Cluster) error {
		if sampled {
			t.Error("OnProbed after a sample")
		}
		seen = c
		return nil
	}
	r, plan := fc.prepare(t, o)
	if err := r.Execute(ctx, plan, o, func(Sample) error { sampled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if seen == nil || seen.CNI != "flannel" || seen.CNIMode != "vxlan" || seen.KubeProxyMode != "nftables" || len(seen.Probes) != 2 {
		t.Fatalf("probed fingerprint %+v", seen)
	}
	run := StoreRun(plan, o, "v", "")
	if run.Labels["k8s.cni"] != "flannel" || run.Labels["k8s.cni_mode"] != "vxlan" || run.Labels["k8s.kube_proxy_mode"] != "nftables" ||
		run.Host.Notes["kube_proxy_mode"] != "nftables" || !strings.Contains(run.Host.Hostname, "[flannel vxlan, kube-proxy nftables]") {
		t.Errorf("stored run: labels %v host %+v", run.Labels, run.Host)
	}
	fc.wantClean(t)
}
