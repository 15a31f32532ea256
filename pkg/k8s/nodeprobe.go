package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cnibench/cnibench/pkg/datapath"
	"github.com/cnibench/cnibench/pkg/runid"
)

// What the API does not say about a cluster's datapath — which mode
// kube-proxy runs in, whether a CNI agent really runs (its node annotations
// outlive it), which tunnel device it made, how Cilium is set up — is read
// on the nodes by a short-lived probe pod per node: `cnibench k8s
// node-info`, on the host network (so it sees the node's links and
// kube-proxy's localhost port) and with hostPID (so it sees the agents'
// processes and their flags), as nobody with no capabilities: listing
// links, reading /proc/<pid>/comm and /proc/<pid>/cmdline and an HTTP GET to
// 127.0.0.1 need none. With --inspect-datapath the probe runs as root with
// CAP_SYS_PTRACE (to reach an agent's API socket through /proc/<pid>/root)
// and CAP_SYS_ADMIN + CAP_NET_ADMIN (to list the BPF programs attached on
// the node's devices and its socket load balancer's cgroup).

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
	// Datapath is the node's pod network as the node shows it: the CNI,
	// its mode and (Cilium) settings, and where each came from.
	Datapath *datapath.Node `json:"datapath,omitempty"`
	// BPF lists the BPF programs attached on the node's devices and its
	// socket load balancer's cgroup, one line each ("eth0 tcx ingress
	// cil_from_netdev"); only with --inspect-datapath, else BPFError
	// says why there is none.
	BPF      []string `json:"bpf,omitempty"`
	BPFError string   `json:"bpf_error,omitempty"`
	// Error says why the probe pod gave nothing ("" = it ran).
	Error string `json:"error,omitempty"`
}

// ProbeNode reads this node: kube-proxy's mode from metricsAddr, the links
// of the current network namespace, the agent processes under procRoot and
// what they say about the pod network. deep (root with CAP_SYS_PTRACE,
// CAP_SYS_ADMIN and CAP_NET_ADMIN) also asks the agents themselves and
// lists the attached BPF programs.
func ProbeNode(ctx context.Context, metricsAddr, procRoot string, deep bool) NodeProbe {
	var p NodeProbe
	p.KubeProxyMode, p.KubeProxyError = kubeProxyMode(ctx, metricsAddr)
	links, err := netlink.LinkList()
	if err == nil {
		for _, l := range links {
			p.Links = append(p.Links, l.Attrs().Name+":"+l.Type())
		}
		sort.Strings(p.Links)
	}
	agents := nodeAgents(procRoot)
	p.Agents = agentNames(agents)
	seen := datapath.Look(ctx, procRoot, p.Links, agents, deep)
	dp := datapath.Recognize(seen)
	p.Datapath = &dp
	if !deep {
		p.BPFError = "not listed (--inspect-datapath lists them)"
		return p
	}
	ps, err := datapath.Attached(socketLBCgroups(procRoot, agents, seen.Args), nil)
	p.BPF = datapath.Summarize(ps)
	if err != nil {
		p.BPFError = err.Error()
	}
	return p
}

// socketLBCgroups are the cgroup directories a socket load balancer
// attaches to, as the probe reaches them: Cilium's --cgroup-root (default
// /run/cilium/cgroupv2) inside the agent's mount namespace.
func socketLBCgroups(procRoot string, agents map[int]string, args map[int][]string) []string {
	var out []string
	for pid, name := range agents {
		if name != "cilium-agent" {
			continue
		}
		root := datapath.FlagValue(args[pid], "cgroup-root")
		if root == "" {
			root = "/run/cilium/cgroupv2"
		}
		dir := filepath.Join(procRoot, strconv.Itoa(pid), "root", root)
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			out = append(out, dir)
		}
	}
	return out
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

// nodeAgents lists the Agents running under procRoot, pid -> name: those
// in the probe's own network namespace (the node's; see netnsID), or every
// one when that namespace cannot be told, so that on a machine whose nodes
// are network namespaces of one kernel (k8slab) a node is not credited
// with its neighbours' agents or the host's ovs-vswitchd.
func nodeAgents(procRoot string) map[int]string {
	self, err := netnsID(procRoot, "self")
	if err != nil {
		self = 0
	}
	return procAgents(procRoot, self)
}

// agentNames lists the agents' names, sorted, once each.
func agentNames(agents map[int]string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, a := range agents {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
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

// NodeProbePod is the probe pod for one node; deep is --inspect-datapath.
func NodeProbePod(o PodOptions, name, node string, deadline int64, deep bool) *corev1.Pod {
	pod := o.basePod(name, "", "probe", Placement{HostNetwork: true}, node)
	pod.Spec.HostPID = true
	// The probe only reads; it tolerates every taint so that a node the
	// benchmark pods avoid can still be described.
	pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	pod.Spec.Containers[0].Args = []string{"k8s", "node-info"}
	if deep {
		pod.Spec.Containers[0].Args = append(pod.Spec.Containers[0].Args, "--deep")
		pod.Spec.Containers[0].SecurityContext = inspectSecurity()
	}
	pod.Spec.Containers[0].Env = nil
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.ActiveDeadlineSeconds = ptr(deadline)
	return pod
}

// probeNodes runs one probe pod per node at once and returns what each
// said; a node whose probe failed carries the reason in Error. Probe pods
// are deleted before it returns.
func (r *Runner) probeNodes(ctx context.Context, po PodOptions, nodes []string, timeout time.Duration, deep bool) []NodeProbe {
	out := make([]NodeProbe, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = r.probeNode(ctx, po, probeName(po.RunID, i), n, timeout, deep)
			out[i].Node = n
		}()
	}
	wg.Wait()
	return out
}

func (r *Runner) probeNode(ctx context.Context, po PodOptions, name, node string, timeout time.Duration, deep bool) NodeProbe {
	api := r.Client.CoreV1().Pods(po.Namespace)
	if _, err := api.Create(ctx, NodeProbePod(po, name, node, max(1, int64(timeout.Seconds())), deep), metav1.CreateOptions{}); err != nil {
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

// ProbeCluster completes cl (read from the API with nodes) with a probe
// pod on every Ready node, in o's namespace (created and deleted when
// missing), as a run does before its first measurement; whatever it
// created is deleted on every path out.
func (r *Runner) ProbeCluster(ctx context.Context, cl *Cluster, nodes []corev1.Node, o Options) (err error) {
	o.defaults()
	po := o.podOptions(r.RunID)
	var ready []string
	for _, st := range NodeStatesFor(nodes, nil, true) {
		if st.Unusable == "" {
			ready = append(ready, st.Name)
		}
	}
	if len(ready) == 0 {
		return fmt.Errorf("no Ready node to probe")
	}
	createdNS := false
	defer func() { err = r.cleanUp(ctx, o, r.RunID, createdNS, err) }()
	if createdNS, err = r.ensureNamespace(ctx, o.Namespace, r.RunID, o.ReadyTimeout); err != nil {
		return err
	}
	cl.ApplyProbes(r.probeNodes(ctx, po, ready, o.ReadyTimeout, o.InspectDatapath), nodes)
	fmt.Fprintf(o.Log, "probed %s\n", strings.Join(ready, ", "))
	return ctx.Err()
}

// inspectSecurity is the deep probe's security context: it reaches the
// agents' API sockets and files through /proc/<pid>/root, which needs
// CAP_SYS_PTRACE beside uid 0 (the agents hold capabilities the probe does
// not), and lists BPF programs by id, which needs CAP_SYS_ADMIN (querying
// a device's or cgroup's programs CAP_NET_ADMIN). Capabilities only reach
// a process running as uid 0 (Kubernetes sets no ambient ones); every other
// capability stays dropped, with no privilege escalation and a read-only
// root, as for the plain probe.
func inspectSecurity() *corev1.SecurityContext {
	sc := engineSecurity()
	sc.RunAsNonRoot = ptr(false)
	sc.RunAsUser = ptr(int64(0))
	sc.RunAsGroup = ptr(int64(0))
	sc.Capabilities.Add = []corev1.Capability{"SYS_PTRACE", "SYS_ADMIN", "NET_ADMIN"}
	return sc
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

// ApplyProbes folds the node probes into the fingerprint: the pod network
// the nodes run (datapath.Recognize: a CNI counts only when its agent runs,
// since node annotations outlive the agent that wrote them — switch a
// cluster from Flannel to another CNI and Flannel's annotations stay), its
// mode, version and settings; and kube-proxy's mode (one value when every
// node agrees, per node otherwise), said the way it is: replaced by Cilium
// when Cilium serves Services and no kube-proxy runs.
func (c *Cluster) ApplyProbes(probes []NodeProbe, nodes []corev1.Node) {
	c.Probes = probes
	var ok []NodeProbe
	var why []string
	for _, p := range probes {
		if p.Error != "" {
			why = append(why, p.Node+": "+p.Error)
			continue
		}
		ok = append(ok, p)
	}
	if len(ok) > 0 {
		c.applyDatapath(ok, nodes)
	}
	c.KubeProxyMode = c.kubeProxyMode(probes, why)
}

// probedDatapath is a probe's reading of its node, also for a probe that
// predates the datapath field (its links and agents say as much).
func probedDatapath(p NodeProbe) datapath.Node {
	if p.Datapath != nil {
		return *p.Datapath
	}
	agents := map[int]string{}
	for i, a := range p.Agents {
		agents[i+1] = a
	}
	return datapath.Recognize(datapath.Seen{Links: p.Links, Agents: agents})
}

// applyDatapath sets the CNI, its mode, version and settings from what the
// probed nodes run.
func (c *Cluster) applyDatapath(ok []NodeProbe, nodes []corev1.Node) {
	cnis := map[string]bool{}
	var dps []datapath.Node
	for _, p := range ok {
		d := probedDatapath(p)
		dps = append(dps, d)
		cnis[d.CNI] = true
	}
	// The bridge plugin has no agent: its only trace is the cni0 bridge,
	// made with a node's first pod, so a node that has none yet says
	// nothing against it (a node without an agent CNI's agent does).
	if len(cnis) == 2 && cnis[datapath.CNIBridge] && cnis[""] {
		var known []NodeProbe
		var kd []datapath.Node
		for i, d := range dps {
			if d.CNI != "" {
				known, kd = append(known, ok[i]), append(kd, d)
			}
		}
		ok, dps, cnis = known, kd, map[string]bool{datapath.CNIBridge: true}
	}
	if len(cnis) != 1 || dps[0].CNI == "" {
		// Nothing known runs, or the nodes differ: the API's answer stands,
		// unless only stale annotations made it.
		if c.CNI == datapath.CNIFlannel && workloadCNI(c) == "" && !cnis[datapath.CNIFlannel] {
			c.CNI = cniUnknown
		}
		if len(cnis) > 1 {
			c.CNI = "mixed (" + perNode(ok, dps, func(d datapath.Node) string { return d.Summary() }) + ")"
		}
		return
	}
	c.CNI = dps[0].CNI
	c.CNIMode = agreed(ok, dps, func(d datapath.Node) string { return d.Mode })
	c.CNIVersion = agreed(ok, dps, func(d datapath.Node) string { return d.Version })
	c.Datapath = agreed(ok, dps, func(d datapath.Node) string { return d.Summary() })
	if c.CNI == datapath.CNIFlannel {
		c.flannelMode(dps, nodes)
	}
	if c.CNI == datapath.CNICilium {
		c.Cilium = ciliumAgreed(dps)
	}
}

// flannelMode: flanneld's own record of its backend (the backend-type
// annotation it writes) names a backend without a device of its own
// (host-gw), checked against the devices the nodes have.
func (c *Cluster) flannelMode(dps []datapath.Node, nodes []corev1.Node) {
	backend := ""
	for _, n := range nodes {
		if b := n.Annotations["flannel.alpha.coreos.com/backend-type"]; b != "" {
			backend = b
			break
		}
	}
	fromConf := false
	for _, d := range dps {
		fromConf = fromConf || (d.Flannel != nil && strings.Contains(d.From, "net-conf"))
	}
	switch {
	case fromConf:
		// flanneld's own configuration, read on the node: nothing to add.
	case backend == "vxlan" && c.CNIMode != "vxlan":
		c.CNIMode = "vxlan? (annotated, but no flannel.1 vxlan device on the probed nodes)"
	case backend != "" && c.CNIMode == "":
		c.CNIMode = backend
	}
	if c.Datapath == "flannel" && c.CNIMode != "" {
		c.Datapath = "flannel " + c.CNIMode
	}
}

// ciliumAgreed is the Cilium settings every node reports alike (a setting
// that differs, or that a node could not read, is left unknown).
func ciliumAgreed(dps []datapath.Node) *datapath.Cilium {
	var out *datapath.Cilium
	for _, d := range dps {
		if d.Cilium == nil {
			return nil
		}
		if out == nil {
			c := *d.Cilium
			out = &c
			continue
		}
		if !boolEq(out.KubeProxyReplacement, d.Cilium.KubeProxyReplacement) {
			out.KubeProxyReplacement = nil
		}
	}
	return out
}

func boolEq(a, b *bool) bool { return a != nil && b != nil && *a == *b }

// agreed is f of the nodes' datapaths when they agree, else per node
// ("n1=vxlan, n2=native").
func agreed(ok []NodeProbe, dps []datapath.Node, f func(datapath.Node) string) string {
	for _, d := range dps[1:] {
		if f(d) != f(dps[0]) {
			return perNode(ok, dps, f)
		}
	}
	return f(dps[0])
}

func perNode(ok []NodeProbe, dps []datapath.Node, f func(datapath.Node) string) string {
	var per []string
	for i, d := range dps {
		per = append(per, ok[i].Node+"="+f(d))
	}
	return strings.Join(per, ", ")
}

// kubeProxyMode says what serves Services: kube-proxy's own answer per
// node, and Cilium's part in it. With Cilium's replacement and no
// kube-proxy answering anywhere, Cilium has replaced it; with the
// replacement beside a running kube-proxy, kube-proxy's rules are there
// but Cilium serves Services first (socket LB at connect()); without the
// replacement, Cilium still translates pods' ClusterIP traffic in its tc
// programs before kube-proxy's rules see it.
func (c *Cluster) kubeProxyMode(probes []NodeProbe, why []string) string {
	modes := map[string]bool{}
	var per []string
	answered := 0
	for _, p := range probes {
		if p.Error != "" {
			continue
		}
		if p.KubeProxyMode == "" {
			why = append(why, p.Node+": "+p.KubeProxyError)
			per = append(per, p.Node+"=unknown")
			continue
		}
		answered++
		modes[p.KubeProxyMode] = true
		per = append(per, p.Node+"="+p.KubeProxyMode)
	}
	var kpr *bool
	if c.Cilium != nil {
		kpr = c.Cilium.KubeProxyReplacement
	}
	mode := ""
	switch {
	case len(modes) == 1 && len(why) == 0:
		for m := range modes {
			mode = m
		}
	case len(modes) > 0:
		mode = strings.Join(per, ", ")
	case answered == 0 && len(per) > 0 && kpr != nil && *kpr:
		return "replaced by Cilium"
	case c.CNI == datapath.CNICilium && kpr == nil && answered == 0 && len(per) > 0:
		return "unknown (" + strings.Join(why, "; ") + "; cilium-agent runs and may replace it: --inspect-datapath asks it)"
	default:
		return "unknown (" + strings.Join(why, "; ") + ")"
	}
	switch {
	case kpr == nil:
		return mode
	case *kpr:
		return mode + " (running, but Cilium's replacement serves Services)"
	}
	return mode + " (pods' ClusterIP traffic translated by Cilium first)"
}

// workloadCNI is set when the CNI was named by a kube-system workload
// (rather than by annotations only); DetectCNI records which.
func workloadCNI(c *Cluster) string { return c.cniSource }
