package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cnibench/cnibench/pkg/runid"
)

// What the API does not say about a cluster's datapath — which mode
// kube-proxy runs in, whether a CNI agent really runs (its node annotations
// outlive it), which tunnel device it made — is read on the nodes by a
// short-lived probe pod per node: `cnibench k8s node-info`, on the host
// network (so it sees the node's links and kube-proxy's localhost port) and
// with hostPID (so it sees the agents' processes), as nobody with no
// capabilities: listing links, reading /proc/<pid>/comm and an HTTP GET to
// 127.0.0.1 need none.

// KubeProxyMetricsAddr is where kube-proxy answers /proxyMode by default
// (its metricsBindAddress).
const KubeProxyMetricsAddr = "127.0.0.1:10249"

// Agents are the datapath agents the probe looks for, by process name.
var Agents = []string{"flanneld", "kube-proxy", "calico-node", "cilium-agent", "ovs-vswitchd",
	"ovn-controller", "kube-ovn-daemon", "antrea-agent", "kube-router"}

// NodeProbe is what `cnibench k8s node-info` prints about its node.
type NodeProbe struct {
	Node string `json:"node,omitempty"`
	// KubeProxyMode is kube-proxy's own answer (iptables, nftables, ipvs);
	// "" with KubeProxyError when it could not be asked.
	KubeProxyMode  string `json:"kube_proxy_mode,omitempty"`
	KubeProxyError string `json:"kube_proxy_error,omitempty"`
	// Links are the node's network devices as name:kind (vxlan, bridge…).
	Links []string `json:"links"`
	// Agents are the datapath agents found running (see Agents).
	Agents []string `json:"agents"`
	// Error says why the probe pod gave nothing ("" = it ran).
	Error string `json:"error,omitempty"`
}

// ProbeNode reads this node: kube-proxy's mode from metricsAddr, the links
// of the current network namespace and the agent processes under procRoot.
func ProbeNode(ctx context.Context, metricsAddr, procRoot string) NodeProbe {
	var p NodeProbe
	p.KubeProxyMode, p.KubeProxyError = kubeProxyMode(ctx, metricsAddr)
	links, err := netlink.LinkList()
	if err == nil {
		for _, l := range links {
			p.Links = append(p.Links, l.Attrs().Name+":"+l.Type())
		}
		sort.Strings(p.Links)
	}
	p.Agents = findAgents(procRoot)
	return p
}

func kubeProxyMode(ctx context.Context, addr string) (string, string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/proxyMode", nil)
	if err != nil {
		return "", err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return "", fmt.Sprintf("no kube-proxy answers on %s (%v)", addr, op.Err)
		}
		return "", err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	mode := strings.TrimSpace(string(b))
	if resp.StatusCode != http.StatusOK || mode == "" || strings.ContainsAny(mode, " \n") {
		return "", fmt.Sprintf("kube-proxy's /proxyMode on %s answered %d %q", addr, resp.StatusCode, mode)
	}
	return mode, ""
}

// findAgents lists the Agents running under procRoot, sorted, once each:
// those in the probe's own network namespace (the node's; see netnsID),
// or every one when that namespace cannot be told, so that on a machine
// whose nodes are network namespaces of one kernel (k8slab) a node is not
// credited with its neighbours' agents or the host's ovs-vswitchd.
func findAgents(procRoot string) []string {
	self, err := netnsID(procRoot, "self")
	if err != nil {
		self = 0
	}
	seen := map[string]bool{}
	for _, a := range procAgents(procRoot, self) {
		seen[a] = true
	}
	out := []string{}
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// probeName names the node probe pod on node i of the plan.
func probeName(runID string, i int) string { return runid.Name(runID, "probe-"+strconv.Itoa(i)) }

// NodeProbePod is the probe pod for one node.
func NodeProbePod(o PodOptions, name, node string, deadline int64) *corev1.Pod {
	pod := o.basePod(name, "", "probe", Placement{HostNetwork: true}, node)
	pod.Spec.HostPID = true
	// The probe only reads; it tolerates every taint so that a node the
	// benchmark pods avoid can still be described.
	pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	pod.Spec.Containers[0].Args = []string{"k8s", "node-info"}
	pod.Spec.Containers[0].Env = nil
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.ActiveDeadlineSeconds = ptr(deadline)
	return pod
}

// probeNodes runs one probe pod per node at once and returns what each
// said; a node whose probe failed carries the reason in Error. Probe pods
// are deleted before it returns.
func (r *Runner) probeNodes(ctx context.Context, po PodOptions, nodes []string, timeout time.Duration) []NodeProbe {
	out := make([]NodeProbe, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = r.probeNode(ctx, po, probeName(po.RunID, i), n, timeout)
			out[i].Node = n
		}()
	}
	wg.Wait()
	return out
}

func (r *Runner) probeNode(ctx context.Context, po PodOptions, name, node string, timeout time.Duration) NodeProbe {
	api := r.Client.CoreV1().Pods(po.Namespace)
	if _, err := api.Create(ctx, NodeProbePod(po, name, node, max(1, int64(timeout.Seconds()))), metav1.CreateOptions{}); err != nil {
		return NodeProbe{Error: APIError("create", "probe pod", err).Error()}
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = api.Delete(dctx, name, metav1.DeleteOptions{})
	}()
	done, err := r.waitPod(ctx, po.Namespace, name, timeout, podFinished)
	if err != nil {
		return NodeProbe{Error: err.Error()}
	}
	logs, err := r.logs(ctx, po.Namespace, name, containerName)
	if err != nil {
		return NodeProbe{Error: APIError("read", "log of "+name, err).Error()}
	}
	if done.Status.Phase == corev1.PodFailed {
		return NodeProbe{Error: oneLine(Explain(done, nil) + "; log: " + lastLine(logs))}
	}
	var p NodeProbe
	if err := json.Unmarshal(lastJSONLine(logs), &p); err != nil {
		return NodeProbe{Error: fmt.Sprintf("probe printed no node-info JSON: %v", err)}
	}
	return p
}

// lastJSONLine is the last line of b that starts with '{'.
func lastJSONLine(b []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "{") {
			return []byte(lines[i])
		}
	}
	return nil
}

// ApplyProbes folds the node probes into the fingerprint: kube-proxy's
// mode (one value when every node agrees, per node otherwise), and the CNI
// corrected by what really runs. Node annotations outlive the agent that
// wrote them (switch a cluster from Flannel to another CNI and Flannel's
// annotations stay), so a CNI seen only in annotations counts only if its
// agent runs; the CNI's mode comes from the agent's own record (Flannel's
// backend-type annotation) checked against the devices on the node.
func (c *Cluster) ApplyProbes(probes []NodeProbe, nodes []corev1.Node) {
	c.Probes = probes
	modes := map[string]bool{}
	var why []string
	var per []string
	agents := map[string]bool{}
	links := map[string]bool{}
	ok := 0
	for _, p := range probes {
		if p.Error != "" {
			why = append(why, p.Node+": "+p.Error)
			continue
		}
		ok++
		for _, a := range p.Agents {
			agents[a] = true
		}
		for _, l := range p.Links {
			links[l] = true
		}
		if p.KubeProxyMode == "" {
			why = append(why, p.Node+": "+p.KubeProxyError)
			per = append(per, p.Node+"=unknown")
			continue
		}
		modes[p.KubeProxyMode] = true
		per = append(per, p.Node+"="+p.KubeProxyMode)
	}
	switch {
	case len(modes) == 1 && len(why) == 0:
		for m := range modes {
			c.KubeProxyMode = m
		}
	case len(modes) > 0:
		c.KubeProxyMode = strings.Join(per, ", ")
	default:
		c.KubeProxyMode = "unknown (" + strings.Join(why, "; ") + ")"
	}
	if ok == 0 {
		return
	}
	// Flannel: the agent must run; its backend is what it announced.
	if agents["flanneld"] {
		if !strings.Contains(c.CNI, "flannel") {
			c.CNI = "flannel"
		}
		backend := ""
		for _, n := range nodes {
			if b := n.Annotations["flannel.alpha.coreos.com/backend-type"]; b != "" {
				backend = b
				break
			}
		}
		hasVXLAN := links["flannel.1:vxlan"]
		switch {
		case backend == "vxlan" && !hasVXLAN:
			c.CNIMode = "vxlan? (annotated, but no flannel.1 vxlan device on the probed nodes)"
		case backend != "":
			c.CNIMode = backend
		case hasVXLAN:
			c.CNIMode = "vxlan"
		}
	} else if c.CNI == "flannel" && workloadCNI(c) == "" {
		// Only stale annotations said flannel.
		c.CNI = cniFromLinks(links)
	} else if c.CNI == cniUnknown {
		c.CNI = cniFromLinks(links)
	}
}

// workloadCNI is set when the CNI was named by a kube-system workload
// (rather than by annotations only); DetectCNI records which.
func workloadCNI(c *Cluster) string { return c.cniSource }

// cniFromLinks names a plain CNI from the node's devices when no agent
// runs: the reference bridge plugin leaves a bridge named cni0, so
// "bridge" means a cni0 bridge and none of the known agents running.
func cniFromLinks(links map[string]bool) string {
	if links["cni0:bridge"] {
		return "bridge"
	}
	return cniUnknown
}
