package k8s

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cnibench/cnibench/pkg/datapath"
)

// Cluster is the fingerprint stored with every Kubernetes run, so runs on
// different clusters, CNIs and kernels can be told apart in one report.
type Cluster struct {
	Context string `json:"context,omitempty"`
	Server  string `json:"server,omitempty"`
	Version string `json:"version"` // the API server's gitVersion
	CNI     string `json:"cni"`
	// CNIMode is the CNI's datapath mode where it has several (Flannel's
	// backend: vxlan, host-gw; Cilium's routing: native, vxlan, geneve);
	// "" when unknown or not applicable.
	CNIMode string `json:"cni_mode,omitempty"`
	// CNIVersion is the CNI agent's version as it reports it (Cilium's
	// API); "" when unknown.
	CNIVersion string `json:"cni_version,omitempty"`
	// Datapath is the probed nodes' pod network in one line ("cilium
	// 1.20.2: tunnel vxlan, kube-proxy replaced (socket LB), host routing
	// legacy, masquerade iptables, tcx/veth"), per node when they differ.
	Datapath string `json:"datapath,omitempty"`
	// Cilium is the Cilium settings every probed node reports alike.
	Cilium *datapath.Cilium `json:"cilium,omitempty"`
	// KubeProxyMode is what kube-proxy on the probed nodes says it runs
	// (iptables, nftables, ipvs), per node when they differ, or "unknown
	// (why)". Empty until a run has probed its nodes.
	KubeProxyMode string     `json:"kube_proxy_mode,omitempty"`
	Nodes         []NodeInfo `json:"nodes"`
	// Probes are the node probes' raw findings.
	Probes []NodeProbe `json:"probes,omitempty"`

	// cniSource is the CNI named by kube-system workloads ("" when only
	// node annotations, or nothing, named one).
	cniSource string
}

// NodeInfo is one node's status as the kubelet reports it.
type NodeInfo struct {
	Name       string `json:"name"`
	InternalIP string `json:"internal_ip,omitempty"`
	Kernel     string `json:"kernel"`
	OSImage    string `json:"os_image"`
	Runtime    string `json:"container_runtime"`
	Kubelet    string `json:"kubelet"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"` // capacity as the kubelet reports it
	// Unusable says why the engine pods cannot run there ("" = usable).
	Unusable string `json:"unusable,omitempty"`
}

// Fingerprint reads the cluster's version, nodes and CNI.
func Fingerprint(ctx context.Context, cs kubernetes.Interface) (*Cluster, []corev1.Node, error) {
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, nil, APIError("get", "the server version", err)
	}
	nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, APIError("list", "nodes", err)
	}
	c := &Cluster{Version: v.GitVersion}
	states := map[string]string{}
	for _, s := range NodeStates(nl.Items) {
		states[s.Name] = s.Unusable
	}
	for _, n := range nl.Items {
		ni := NodeInfo{
			Name: n.Name, Kernel: n.Status.NodeInfo.KernelVersion, OSImage: n.Status.NodeInfo.OSImage,
			Runtime: n.Status.NodeInfo.ContainerRuntimeVersion, Kubelet: n.Status.NodeInfo.KubeletVersion,
			Arch: n.Status.NodeInfo.Architecture, Unusable: states[n.Name],
		}
		if q, ok := n.Status.Capacity[corev1.ResourceCPU]; ok {
			ni.CPUs = int(q.Value())
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && ni.InternalIP == "" {
				ni.InternalIP = a.Address
			}
		}
		c.Nodes = append(c.Nodes, ni)
	}
	sort.Slice(c.Nodes, func(i, j int) bool { return c.Nodes[i].Name < c.Nodes[j].Name })

	// Reading kube-system is a nicety: a user allowed only the cnibench
	// namespace still gets a run, with the CNI marked as not readable.
	var names []string
	if ds, err := cs.AppsV1().DaemonSets("kube-system").List(ctx, metav1.ListOptions{}); err == nil {
		for _, d := range ds.Items {
			names = append(names, d.Name)
		}
	}
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
	}
	c.CNI = DetectCNI(names, nl.Items)
	if w := DetectCNI(names, nil); w != cniUnknown {
		c.cniSource = w
	}
	if err != nil && c.CNI == cniUnknown {
		c.CNI = "unknown (cannot list kube-system pods: " + err.Error() + ")"
	}
	return c, nl.Items, nil
}

const cniUnknown = "unknown (bridge?)"

// cniSignatures maps name fragments of kube-system workloads, and node
// annotation prefixes, to the CNI they belong to. More specific entries
// come first: canal runs calico and flannel, ovnkube is not kube-ovn.
var cniSignatures = []struct{ fragment, cni string }{
	{"canal", "canal"},
	{"kube-ovn", "kube-ovn"},
	{"ovnkube", "ovn-kubernetes"},
	{"cilium", "cilium"},
	{"calico", "calico"},
	{"flannel", "flannel"},
	{"antrea", "antrea"},
	{"weave", "weave"},
	{"kindnet", "kindnet"},
	{"kube-router", "kube-router"},
	{"aws-node", "aws-vpc-cni"},
	{"azure-cns", "azure-cni"},
	{"azure-vnet", "azure-cni"},
	{"gke-", "gke"},
}

var annotationSignatures = []struct{ prefix, cni string }{
	{"projectcalico.org/", "calico"},
	{"flannel.alpha.coreos.com/", "flannel"},
	{"io.cilium", "cilium"},
	{"network.cilium.io/", "cilium"},
	{"ovn.kubernetes.io/", "kube-ovn"},
	{"k8s.ovn.org/", "ovn-kubernetes"},
}

// DetectCNI names the CNI from kube-system DaemonSet and pod names, then
// from node annotations. The CNI config in /etc/cni/net.d would be the
// authority, but it is on the nodes, not in the API. A cluster with none of
// the known agents most likely uses a plain plugin such as bridge.
func DetectCNI(workloadNames []string, nodes []corev1.Node) string {
	found := map[string]bool{}
	for _, n := range workloadNames {
		for _, s := range cniSignatures {
			if strings.Contains(n, s.fragment) {
				found[s.cni] = true
				break
			}
		}
	}
	if len(found) == 0 {
		for _, n := range nodes {
			for k := range n.Annotations {
				for _, s := range annotationSignatures {
					if strings.HasPrefix(k, s.prefix) {
						found[s.cni] = true
					}
				}
			}
		}
	}
	if len(found) == 0 {
		return cniUnknown
	}
	var out []string
	for c := range found {
		out = append(out, c)
	}
	sort.Strings(out)
	return strings.Join(out, "+")
}

// Summary is the fingerprint in one line for logs and report labels.
func (c *Cluster) Summary() string {
	kernels := map[string]bool{}
	var ks []string
	for _, n := range c.Nodes {
		k := n.Kernel + " (" + n.OSImage + ")"
		if !kernels[k] {
			kernels[k] = true
			ks = append(ks, k)
		}
	}
	cni := c.CNI
	perNode := strings.Contains(c.Datapath, "=")
	switch {
	case perNode:
		// The nodes differ: each one's in full.
		cni += " (per node: " + c.Datapath + ")"
	case strings.Contains(c.Datapath, ": "):
		// Cilium's settings beyond the mode: "cilium 1.20.2 (vxlan; tunnel
		// vxlan, kube-proxy replaced (socket LB), …)".
		_, details, _ := strings.Cut(c.Datapath, ": ")
		if c.CNIVersion != "" {
			cni += " " + c.CNIVersion
		}
		cni += " (" + strings.TrimSpace(c.CNIMode+"; "+details) + ")"
		cni = strings.Replace(cni, "(; ", "(", 1)
	case c.CNIMode != "":
		cni += " (" + c.CNIMode + ")"
	}
	kp := ""
	if c.KubeProxyMode != "" {
		kp = ", kube-proxy " + c.KubeProxyMode
	}
	return fmt.Sprintf("Kubernetes %s, CNI %s%s, %d node(s), kernel %s", c.Version, cni, kp, len(c.Nodes), strings.Join(ks, " / "))
}
