package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
)

// `cnibench k8s latency`: how long the control plane takes to reach the
// datapath, as kube-burner's serviceLatency and netpolLatency ask it, per
// trial and over N trials:
//
//   - service: a new ClusterIP Service (in front of a pod that is already
//     Ready) until a connection to it succeeds from every node;
//   - policy: a NetworkPolicy denying all ingress to a pod until a
//     connection to that pod is refused (or dropped) from every node, then
//     one allowing the agents until they succeed again;
//   - pod: a new pod until a packet it sends is answered by every node.
//
// One agent pod per node probes the target every ProbeInterval from before
// the object is created (its own start-up is not measured) and prints each
// change of state with the instant of the attempt that saw it; the latency
// of a node is that instant minus the instant the API server's answer to
// the create arrived, and a trial's is the slowest node's. A node that does
// not see the change within the trial's timeout fails the trial: a failure,
// never a latency.

// Latency kinds (--kinds).
const (
	LatencyService = "service"
	LatencyPolicy  = "policy"
	LatencyPod     = "pod"
)

// LatencyKinds lists the kinds in the order a run measures them.
var LatencyKinds = []string{LatencyService, LatencyPolicy, LatencyPod}

const (
	// MaxTrials bounds --trials.
	MaxTrials = 1000
	// latencyPort is the agents' and the target's port.
	latencyPort       = 7421
	scenarioLatency   = "latency"
	roleLatencyAgent  = "latency-agent"
	roleLatencyTarget = "latency-target"
	roleLatencyPod    = "latency-pod"
	roleLatencyObject = "latency-object"
	// Probe target names in the agents' edges.
	targetService = "svc"
	targetPolicy  = "pol"
)

// LatencyOptions configure one latency run.
type LatencyOptions struct {
	Namespace  string
	Image      string
	PullPolicy corev1.PullPolicy
	Kinds      []string
	Trials     int
	// Services is how many filler Services the cluster holds meanwhile.
	Services int
	// TrialTimeout bounds one trial (and the wait for the agents to be
	// back where a trial starts); ReadyTimeout a pod's start.
	TrialTimeout, ReadyTimeout time.Duration
	// OnProbed is called once the nodes are probed (the CNI and the proxy
	// mode known), before the first object is created.
	OnProbed func(*Cluster) error
	Keep     bool
	Log      io.Writer
}

func (o *LatencyOptions) defaults() {
	podDefaults(&o.Namespace, &o.PullPolicy, &o.Log)
	if o.TrialTimeout <= 0 {
		o.TrialTimeout = 2 * time.Minute
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
}

// Trial is one created object and what every node saw of it.
type Trial struct {
	Test string `json:"test"` // one of result.ControlPlaneTests
	N    int    `json:"trial"`
	// Node is where a pod trial's new pod ran.
	Node      string    `json:"node,omitempty"`
	SentAt    time.Time `json:"sent_at"`
	CreatedAt time.Time `json:"created_at"`
	// LatencyNs is the slowest node's; nil when the trial failed.
	LatencyNs *float64                  `json:"latency_ns"`
	Nodes     []result.ControlPlaneNode `json:"nodes"`
	// Error says why the trial has no latency: a node that never saw the
	// change, or (Missing) why the kind cannot be measured here.
	Error   string `json:"error,omitempty"`
	Missing bool   `json:"missing,omitempty"`
	// KubeProxySync (Service trials): what kube-proxy on the slowest node
	// did between the create and its datapath seeing the Service
	// (result.ControlPlane.KubeProxySync); each node's figures are in Nodes.
	KubeProxySync string `json:"kube_proxy_sync,omitempty"`
}

// latencyRun is one Latency call's state.
type latencyRun struct {
	r       *Runner
	o       LatencyOptions
	po      PodOptions
	nodes   []string
	onTrial func(Trial) error
	// targetIP is the target pod's address once it runs ("" before).
	targetIP string
}

// Latency runs the trials of every kind on the usable nodes, handing each
// trial to onTrial as it ends. Whatever it created is deleted when it
// returns, on success, error and cancellation (unless o.Keep).
func (r *Runner) Latency(ctx context.Context, cl *Cluster, nodes []corev1.Node, o LatencyOptions, onTrial func(Trial) error) (err error) {
	o.defaults()
	if r.RunID == "" {
		r.RunID = runid.New()
	}
	lr := &latencyRun{r: r, o: o, onTrial: onTrial,
		po: PodOptions{RunID: r.RunID, Namespace: o.Namespace, Image: o.Image, PullPolicy: o.PullPolicy, Port: latencyPort}}
	for _, st := range NodeStatesFor(nodes, nil, false) {
		if st.Unusable == "" {
			lr.nodes = append(lr.nodes, st.Name)
		}
	}
	if len(lr.nodes) == 0 {
		return fmt.Errorf("no usable node (nodes: %s)", describeNodes(NodeStatesFor(nodes, nil, false)))
	}
	createdNS := false
	defer func() {
		err = r.cleanUp(ctx, Options{Namespace: o.Namespace, Keep: o.Keep, Services: o.Services, Log: o.Log}, r.RunID, createdNS, err)
	}()
	if createdNS, err = r.ensureNamespace(ctx, o.Namespace, r.RunID, o.ReadyTimeout); err != nil {
		return err
	}
	cl.ApplyProbes(r.probeNodes(ctx, lr.po, lr.nodes, o.ReadyTimeout, false), nodes)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted while probing the nodes: %w", err)
	}
	fmt.Fprintf(o.Log, "latency run %s on %s: %s\n", r.RunID, strings.Join(lr.nodes, ", "), cl.Summary())
	if o.OnProbed != nil {
		if err := o.OnProbed(cl); err != nil {
			return err
		}
	}
	if o.Services > 0 {
		t0 := time.Now()
		if err := createFillers(ctx, r.bulk(), lr.po, o.Services, func(done int) {
			fmt.Fprintf(o.Log, "filler services: %d of %d created\n", done, o.Services)
		}); err != nil {
			return fmt.Errorf("creating %d filler services: %w", o.Services, err)
		}
		fmt.Fprintf(o.Log, "filler services: %d created in %.1fs\n", o.Services, time.Since(t0).Seconds())
	}
	for _, k := range o.Kinds {
		var err error
		switch k {
		case LatencyService:
			err = lr.service(ctx)
		case LatencyPolicy:
			if ok, why := enforcesPolicy(cl.CNI); !ok {
				err = lr.missing(why, result.NetpolDenyLatency, result.NetpolAllowLatency)
			} else {
				err = lr.policy(ctx)
			}
		case LatencyPod:
			err = lr.pod(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s latency: %w", k, err)
		}
	}
	return nil
}

// policyCNIs enforce NetworkPolicy (by the names Cluster.CNI uses).
var policyCNIs = []string{"cilium", "calico", "canal", "antrea", "kube-router", "kube-ovn", "ovn-kubernetes", "weave"}

// enforcesPolicy says whether the CNI named cni enforces NetworkPolicy,
// and why not: a policy nobody enforces would time out every trial, which
// is no latency.
func enforcesPolicy(cni string) (bool, string) {
	name, _, _ := strings.Cut(cni, " ")
	switch {
	case slices.Contains(policyCNIs, name):
		return true, ""
	case name == "flannel" || name == "bridge":
		return false, fmt.Sprintf("the cluster's CNI (%s) does not enforce NetworkPolicy", cni)
	}
	return false, fmt.Sprintf("the cluster's CNI (%s) is not known to enforce NetworkPolicy (known: %s)", cni, strings.Join(policyCNIs, ", "))
}

// missing hands over every trial of tests as missing, with why.
func (lr *latencyRun) missing(why string, tests ...string) error {
	fmt.Fprintf(lr.o.Log, "%s: missing: %s\n", strings.Join(tests, ", "), why)
	for _, t := range tests {
		for i := 1; i <= lr.o.Trials; i++ {
			if err := lr.onTrial(Trial{Test: t, N: i, Error: why, Missing: true}); err != nil {
				return err
			}
		}
	}
	return nil
}

// notRun hands over trials from..Trials of test as failed with why.
func (lr *latencyRun) notRun(test string, from int, why error) error {
	for i := from; i <= lr.o.Trials; i++ {
		if err := lr.onTrial(Trial{Test: test, N: i, Error: "not run: " + why.Error()}); err != nil {
			return err
		}
	}
	return nil
}

// service measures result.SvcLatency: the Service is created, measured,
// deleted and created again with the same ClusterIP, which the agents
// probe from the start (an address learnt only from the create's answer
// would start the probes late).
func (lr *latencyRun) service(ctx context.Context) (err error) {
	if err := lr.ensureTarget(ctx); err != nil {
		return err
	}
	// The watchers start first, so they see kube-proxy's sync of the
	// reserving Service's delete too (waitProxySynced).
	watchers, noWatcher := lr.startProxyWatchers(ctx)
	defer lr.stopPods(ctx, watchers, roleLatencyProxy, &err)
	api := lr.r.Client.CoreV1().Services(lr.po.Namespace)
	got, err := api.Create(ctx, lr.serviceSpec(""), metav1.CreateOptions{})
	if err != nil {
		return APIError("create", "service", err)
	}
	ip := got.Spec.ClusterIP
	if err := lr.deleteObject(ctx, "service", got.Name); err != nil {
		return err
	}
	deleted := time.Now()
	agents, err := lr.startAgents(ctx, []string{targetService + "=" + net.JoinHostPort(ip, strconv.Itoa(latencyPort))})
	if err != nil {
		return err
	}
	defer lr.stopAgents(ctx, agents, &err)
	fmt.Fprintf(lr.o.Log, "service: agents probe ClusterIP %s on %s\n", ip, strings.Join(lr.nodes, ", "))
	for i := 1; i <= lr.o.Trials; i++ {
		if err := lr.waitProxySynced(ctx, watchers, deleted); err != nil {
			return lr.notRun(result.SvcLatency, i, err)
		}
		if err := lr.waitState(ctx, agents, targetService, false); err != nil {
			return lr.notRun(result.SvcLatency, i, fmt.Errorf("the ClusterIP %s still answers after the last trial's Service was deleted: %w", ip, err))
		}
		sent, created, err := lr.createReleased(ctx, func() error {
			_, err := api.Create(ctx, lr.serviceSpec(ip), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return APIError("create", "service", err)
		}
		t, err := lr.await(ctx, agents, result.SvcLatency, i, targetService, true, sent, created)
		if err != nil {
			return err
		}
		if err := lr.proxySyncs(ctx, &t, watchers, noWatcher); err != nil {
			return err
		}
		if err := lr.onTrial(t); err != nil {
			return err
		}
		if err := lr.deleteObject(ctx, "service", got.Name); err != nil {
			return err
		}
		deleted = time.Now()
	}
	return nil
}

// policy measures result.NetpolDenyLatency and NetpolAllowLatency: per
// trial a policy denying all ingress to the target, then one allowing the
// agents, then both deleted.
func (lr *latencyRun) policy(ctx context.Context) (err error) {
	if err := lr.ensureTarget(ctx); err != nil {
		return err
	}
	agents, err := lr.startAgents(ctx, []string{targetPolicy + "=" + net.JoinHostPort(lr.targetIP, strconv.Itoa(latencyPort))})
	if err != nil {
		return err
	}
	defer lr.stopAgents(ctx, agents, &err)
	api := lr.r.Client.NetworkingV1().NetworkPolicies(lr.po.Namespace)
	for i := 1; i <= lr.o.Trials; i++ {
		if err := lr.waitState(ctx, agents, targetPolicy, true); err != nil {
			why := fmt.Errorf("the target does not answer every agent with no policy in place: %w", err)
			if err := lr.notRun(result.NetpolDenyLatency, i, why); err != nil {
				return err
			}
			return lr.notRun(result.NetpolAllowLatency, i, why)
		}
		deny, allow := lr.policySpecs(i)
		steps := []struct {
			test string
			pol  *networkingv1.NetworkPolicy
			ok   bool
		}{{result.NetpolDenyLatency, deny, false}, {result.NetpolAllowLatency, allow, true}}
		for j, s := range steps {
			sent, created, err := createAt(func() error {
				_, err := api.Create(ctx, s.pol, metav1.CreateOptions{})
				return err
			})
			if err != nil {
				return APIError("create", "networkpolicy", err)
			}
			t, err := lr.await(ctx, agents, s.test, i, targetPolicy, s.ok, sent, created)
			if err != nil {
				return err
			}
			if err := lr.onTrial(t); err != nil {
				return err
			}
			if t.Error != "" && j == 0 {
				// Without the deny in force, the allow's success says nothing.
				if err := lr.onTrial(Trial{Test: result.NetpolAllowLatency, N: i, Error: "not run: the deny policy was not enforced"}); err != nil {
					return err
				}
				break
			}
		}
		// The deny first: deleting the allow first would close the
		// target again for a moment.
		for _, p := range []*networkingv1.NetworkPolicy{deny, allow} {
			if err := lr.deleteObject(ctx, "networkpolicy", p.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// pod measures result.PodReadyLatency: per trial a new pod, on each node in
// turn, connects to every node's agent until each has answered.
func (lr *latencyRun) pod(ctx context.Context) (err error) {
	agents, err := lr.startAgents(ctx, nil)
	if err != nil {
		return err
	}
	defer lr.stopAgents(ctx, agents, &err)
	var targets []string
	for _, a := range agents {
		targets = append(targets, a.node+"="+net.JoinHostPort(a.ip, strconv.Itoa(latencyPort)))
	}
	api := lr.r.Client.CoreV1().Pods(lr.po.Namespace)
	for i := 1; i <= lr.o.Trials; i++ {
		node := lr.nodes[(i-1)%len(lr.nodes)]
		pod := lr.newPod(i, node, targets)
		sent, created, err := createAt(func() error {
			_, err := api.Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return APIError("create", "pod "+pod.Name, err)
		}
		t := Trial{Test: result.PodReadyLatency, N: i, Node: node}
		done, err := lr.r.waitPod(ctx, pod.Namespace, pod.Name, lr.o.TrialTimeout+lr.o.ReadyTimeout, podFinished)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			t.SentAt, t.CreatedAt, t.Error = sent, created, fmt.Sprintf("pod %s: %v", pod.Name, err)
		default:
			b, lerr := lr.r.logs(ctx, pod.Namespace, pod.Name, containerName)
			if lerr != nil {
				return fmt.Errorf("read the log of %s: %w", pod.Name, lerr)
			}
			byNode := map[string][]Edge{}
			for _, e := range ParseEdges(b) {
				byNode[e.Target] = append(byNode[e.Target], e)
			}
			t = LatencyTrial(result.PodReadyLatency, i, lr.nodes, byNode, true, sent, created)
			t.Node = node
			if done.Status.Phase != corev1.PodSucceeded && t.Error == "" {
				t.Error = "pod " + pod.Name + ": " + oneLine(Explain(done, nil))
				t.LatencyNs = nil
			}
		}
		if err := lr.onTrial(t); err != nil {
			return err
		}
		if err := lr.deleteObject(ctx, "pod", pod.Name); err != nil {
			return err
		}
		if err := lr.r.waitPodsGone(ctx, lr.po.Namespace, RunSelector(lr.po.RunID)+","+LabelRole+"="+roleLatencyPod); err != nil {
			return err
		}
	}
	return nil
}

// createReleased is createAt for a Service taking the ClusterIP its
// predecessor held: until the API server has released that address the
// create is refused as "already allocated", so it is tried again (the
// trial counts from the create that succeeded), up to the trial's timeout.
func (lr *latencyRun) createReleased(ctx context.Context, create func() error) (sent, answered time.Time, err error) {
	deadline := time.Now().Add(lr.o.TrialTimeout)
	for {
		sent, answered, err = createAt(create)
		if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "already allocated") || time.Now().After(deadline) {
			return sent, answered, err
		}
		select {
		case <-ctx.Done():
			return sent, answered, ctx.Err()
		case <-time.After(lr.poll()):
		}
	}
}

// createAt runs create and says when its request left and when the API
// server's answer arrived.
func createAt(create func() error) (sent, answered time.Time, err error) {
	sent = time.Now()
	err = create()
	return sent, time.Now(), err
}

// agent is one running agent pod.
type agent struct{ node, pod, ip string }

// startAgents starts one agent per node probing targets (none: only
// answering) and waits until each is Ready. They run until the run ends.
func (lr *latencyRun) startAgents(ctx context.Context, targets []string) ([]agent, error) {
	api := lr.r.Client.CoreV1().Pods(lr.po.Namespace)
	var out []agent
	kind := "answer"
	if len(targets) > 0 {
		kind = strings.SplitN(targets[0], "=", 2)[0]
	}
	for i, n := range lr.nodes {
		name := runid.Name(lr.po.RunID, fmt.Sprintf("lat-%s-%d", kind, i))
		p := lr.agentPod(name, roleLatencyAgent, n, targets)
		if _, err := api.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return nil, APIError("create", "agent pod "+name, err)
		}
		out = append(out, agent{node: n, pod: name})
	}
	for i := range out {
		p, err := lr.r.waitPod(ctx, lr.po.Namespace, out[i].pod, lr.o.ReadyTimeout, podReady)
		if err != nil {
			return nil, fmt.Errorf("agent pod %s: %w", out[i].pod, err)
		}
		out[i].ip = p.Status.PodIP
	}
	return out, nil
}

// stopAgents deletes a kind's agents once its trials are done, so that
// their probes load no node during the next kind's; on an error the run's
// cleanup deletes them.
func (lr *latencyRun) stopAgents(ctx context.Context, agents []agent, err *error) {
	pods := map[string]string{}
	for _, a := range agents {
		pods[a.node] = a.pod
	}
	lr.stopPods(ctx, pods, roleLatencyAgent, err)
}

// stopPods deletes pods (node -> pod) of role as stopAgents does.
func (lr *latencyRun) stopPods(ctx context.Context, pods map[string]string, role string, err *error) {
	if *err != nil {
		return
	}
	for _, p := range pods {
		if *err = lr.deleteObject(ctx, "pod", p); *err != nil {
			return
		}
	}
	*err = lr.r.waitPodsGone(ctx, lr.po.Namespace, RunSelector(lr.po.RunID)+","+LabelRole+"="+role)
}

// ensureTarget starts the pod the Service and the policies are about, on
// the last usable node (across nodes from the first agent when there are
// two), once per run.
func (lr *latencyRun) ensureTarget(ctx context.Context) error {
	if lr.targetIP != "" {
		return nil
	}
	name := runid.Name(lr.po.RunID, "lat-target")
	p := lr.agentPod(name, roleLatencyTarget, lr.nodes[len(lr.nodes)-1], nil)
	if _, err := lr.r.Client.CoreV1().Pods(lr.po.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return APIError("create", "target pod", err)
	}
	got, err := lr.r.waitPod(ctx, lr.po.Namespace, name, lr.o.ReadyTimeout, podReady)
	if err != nil {
		return fmt.Errorf("target pod %s: %w", name, err)
	}
	lr.targetIP = got.Status.PodIP
	return nil
}

// agentPod runs `cnibench k8s latency-agent` answering on latencyPort
// (its readiness probe) and probing targets.
func (lr *latencyRun) agentPod(name, role, node string, targets []string) *corev1.Pod {
	pod := lr.po.basePod(name, scenarioLatency, role, Placement{}, node)
	c := &pod.Spec.Containers[0]
	c.Args = []string{"k8s", "latency-agent", "--listen", fmt.Sprintf(":%d", latencyPort)}
	for _, t := range targets {
		c.Args = append(c.Args, "--target", t)
	}
	c.Ports = []corev1.ContainerPort{{Name: "tcp", ContainerPort: latencyPort, Protocol: corev1.ProtocolTCP}}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(latencyPort)}},
		PeriodSeconds: 1,
	}
	return pod
}

// newPod is trial n's new pod on node, connecting to every agent.
func (lr *latencyRun) newPod(n int, node string, targets []string) *corev1.Pod {
	pod := lr.po.basePod(runid.Name(lr.po.RunID, "lat-pod-"+strconv.Itoa(n)), scenarioLatency, roleLatencyPod, Placement{}, node)
	c := &pod.Spec.Containers[0]
	c.Args = []string{"k8s", "latency-agent", "--until-ok", "--deadline", lr.o.TrialTimeout.String()}
	for _, t := range targets {
		c.Args = append(c.Args, "--target", t)
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.ActiveDeadlineSeconds = ptr(int64((lr.o.TrialTimeout + lr.o.ReadyTimeout).Seconds()))
	return pod
}

// serviceSpec is the trial's Service in front of the target; clusterIP ""
// lets the API server choose.
func (lr *latencyRun) serviceSpec(clusterIP string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: runid.Name(lr.po.RunID, "lat-svc"), Namespace: lr.po.Namespace,
			Labels: lr.po.labels(scenarioLatency, roleLatencyObject)},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: clusterIP,
			Selector:  lr.po.labels(scenarioLatency, roleLatencyTarget),
			Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: latencyPort,
				TargetPort: intstr.FromInt32(latencyPort)}},
		},
	}
}

// policySpecs are trial n's policies on the target: one denying all
// ingress, one allowing the agents.
func (lr *latencyRun) policySpecs(n int) (deny, allow *networkingv1.NetworkPolicy) {
	target := metav1.LabelSelector{MatchLabels: lr.po.labels(scenarioLatency, roleLatencyTarget)}
	mk := func(what string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: runid.Name(lr.po.RunID, fmt.Sprintf("lat-%s-%d", what, n)), Namespace: lr.po.Namespace,
				Labels: lr.po.labels(scenarioLatency, roleLatencyObject)},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: target, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		}
	}
	deny, allow = mk("deny"), mk("allow")
	allow.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
		PodSelector: &metav1.LabelSelector{MatchLabels: lr.po.labels(scenarioLatency, roleLatencyAgent)}}}}}
	return deny, allow
}

// deleteObject deletes one of the trial's objects; gone already is fine.
func (lr *latencyRun) deleteObject(ctx context.Context, kind, name string) error {
	ns := lr.po.Namespace
	var err error
	switch kind {
	case "service":
		err = lr.r.Client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
	case "networkpolicy":
		err = lr.r.Client.NetworkingV1().NetworkPolicies(ns).Delete(ctx, name, metav1.DeleteOptions{})
	case "pod":
		err = lr.r.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return APIError("delete", kind+" "+name, err)
	}
	return nil
}

// latencyPoll is how often the agents' logs are read while a trial runs:
// it decides only how soon a trial is seen to end, not its latency (the
// agents' timestamps do).
func (lr *latencyRun) poll() time.Duration {
	if lr.r.Poll > 0 {
		return lr.r.Poll
	}
	return 100 * time.Millisecond
}

// edges reads every agent's log: its edges by node for target.
func (lr *latencyRun) edges(ctx context.Context, agents []agent, target string) (map[string][]Edge, error) {
	out := map[string][]Edge{}
	for _, a := range agents {
		b, err := lr.r.logs(ctx, lr.po.Namespace, a.pod, containerName)
		if err != nil {
			return nil, fmt.Errorf("read the log of agent %s: %w", a.pod, err)
		}
		for _, e := range ParseEdges(b) {
			if e.Target == target {
				out[a.node] = append(out[a.node], e)
			}
		}
	}
	return out, nil
}

// waitState waits until every agent's latest state of target is ok.
func (lr *latencyRun) waitState(ctx context.Context, agents []agent, target string, ok bool) error {
	var behind []string
	err := pollUntil(ctx, lr.poll(), lr.o.TrialTimeout, func() (bool, error) {
		byNode, err := lr.edges(ctx, agents, target)
		if err != nil {
			return false, err
		}
		behind = behind[:0]
		for _, a := range agents {
			es := byNode[a.node]
			if len(es) == 0 || es[len(es)-1].OK != ok {
				behind = append(behind, a.node)
			}
		}
		return len(behind) == 0, nil
	})
	if errors.Is(err, errPollTimeout) {
		return fmt.Errorf("not after %s on %s", lr.o.TrialTimeout, strings.Join(behind, ", "))
	}
	return err
}

// await waits until every agent saw target reach ok after sent, or the
// trial's timeout, and returns the trial.
func (lr *latencyRun) await(ctx context.Context, agents []agent, test string, n int, target string, ok bool, sent, created time.Time) (Trial, error) {
	var t Trial
	err := pollUntil(ctx, lr.poll(), lr.o.TrialTimeout, func() (bool, error) {
		byNode, err := lr.edges(ctx, agents, target)
		if err != nil {
			return false, err
		}
		t = LatencyTrial(test, n, lr.nodes, byNode, ok, sent, created)
		return t.Error == "", nil
	})
	if err != nil && !errors.Is(err, errPollTimeout) {
		return t, err
	}
	if t.Error != "" {
		t.Error += fmt.Sprintf(" within %s", lr.o.TrialTimeout)
	}
	return t, nil
}

// ParseEdges reads a prober's output; lines that are not edges (a log's
// other lines) are skipped.
func ParseEdges(b []byte) []Edge {
	var out []Edge
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var e Edge
		if err := json.Unmarshal([]byte(line), &e); err == nil && e.Target != "" && e.At > 0 {
			out = append(out, e)
		}
	}
	return out
}
