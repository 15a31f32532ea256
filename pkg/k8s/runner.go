package k8s

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
)

// Options configure one `cnibench k8s run`.
type Options struct {
	Namespace  string
	Image      string
	PullPolicy corev1.PullPolicy
	Port       int

	Scenarios              []string
	ClientNode, ServerNode string
	// NodeSelector, a label selector ("" = every node), limits the nodes
	// the run may use.
	NodeSelector string
	// ClientSelector and ServerSelector choose the client's and the
	// server's node by label, as ClientNode and ServerNode do by name.
	ClientSelector, ServerSelector string
	// TolerateTaints lets the engine pods onto tainted nodes.
	TolerateTaints bool
	Client         ClientArgs
	// Engines measure every scenario, each with its tests (ParseEngines);
	// empty means builtin with Client.Tests.
	Engines []EngineRun
	Repeats int

	// ReadyTimeout bounds the wait for a server pod to become Ready and for
	// a client pod to start.
	ReadyTimeout time.Duration
	// MeasureTimeout bounds one client pod from start to exit.
	MeasureTimeout time.Duration
	// AgentCPU meters the datapath agents of the client's and server's
	// nodes in every measured window (see agents.go).
	AgentCPU bool
	// Services is how many filler Services (see FillerService) the
	// measured Service sits behind; 0 = none.
	Services int
	// SettleIdle, in percent (0 = off): before the first measurement, wait
	// until each client node's CPUs were this idle over SettleWindow (at
	// most SettleTimeout; see settle.go).
	SettleIdle float64
	// OnProbed, if set, is called once the run has probed its nodes and
	// completed plan.Cluster (kube-proxy mode, the running CNI), before
	// any measurement, so the caller can store the final fingerprint.
	OnProbed func(*Cluster) error
	// Keep leaves the run's objects in place, for debugging.
	Keep bool
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

func (o *Options) defaults() {
	podDefaults(&o.Namespace, &o.PullPolicy, &o.Log)
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.Repeats <= 0 {
		o.Repeats = 1
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.MeasureTimeout <= 0 {
		o.MeasureTimeout = 10 * time.Minute
	}
}

// podDefaults fills in what a run and an audit, which both start cnibench
// pods, default alike: the namespace, the image pull policy and the log.
func podDefaults(namespace *string, pull *corev1.PullPolicy, log *io.Writer) {
	if *namespace == "" {
		*namespace = DefaultNamespace
	}
	if *pull == "" {
		*pull = corev1.PullIfNotPresent
	}
	if *log == nil {
		*log = io.Discard
	}
}

func (o Options) podOptions(id string) PodOptions {
	return PodOptions{RunID: id, Namespace: o.Namespace, Image: o.Image, PullPolicy: o.PullPolicy, Port: o.Port,
		TokenSecret: TokenSecretName(id), TolerateTaints: o.TolerateTaints}
}

// Runner drives runs against one cluster.
type Runner struct {
	Client kubernetes.Interface
	// Logs reads one container's log; nil uses the pods/log API. Tests
	// replace it because the fake clientset has no logs.
	Logs func(ctx context.Context, namespace, pod, container string) ([]byte, error)
	// Poll is the interval between status checks; 0 means 500ms.
	Poll time.Duration
	// RunID names the run's objects; "" draws a new one.
	RunID string
	// Bulk, if set, creates and deletes the filler Services: a client
	// without Client's request rate limit (the API server's own
	// priority-and-fairness still applies). nil uses Client.
	Bulk kubernetes.Interface
}

func (r *Runner) bulk() kubernetes.Interface {
	if r.Bulk != nil {
		return r.Bulk
	}
	return r.Client
}

// Plan is what a run will do: where each scenario goes and in which order
// the client pods run.
type Plan struct {
	RunID      string      `json:"run_id"`
	Namespace  string      `json:"namespace"`
	Cluster    *Cluster    `json:"cluster"`
	Placements []Placement `json:"placements"`
	Engines    []EngineRun `json:"engines"`
	// EngineSkips are the (scenario/engine) pairs left out of a scenario
	// that runs with other engines, and why.
	EngineSkips map[string]string `json:"engine_skips,omitempty"`
	Steps       []Step            `json:"-"`
	// nodes are the Node objects as Prepare read them.
	nodes []corev1.Node
}

// Prepare reads the cluster and places the scenarios. It creates nothing.
func (r *Runner) Prepare(ctx context.Context, o Options) (*Plan, error) {
	o.defaults()
	if r.RunID == "" {
		r.RunID = runid.New()
	}
	if o.Image == "" {
		return nil, errors.New("no image: pass --image")
	}
	cl, nodes, err := Fingerprint(ctx, r.Client)
	if err != nil {
		return nil, err
	}
	var sel labels.Selector
	if o.NodeSelector != "" {
		if sel, err = labels.Parse(o.NodeSelector); err != nil {
			return nil, &FlagError{fmt.Sprintf("--node-selector %q: %v", o.NodeSelector, err)}
		}
	}
	states := NodeStatesFor(nodes, sel, o.TolerateTaints)
	cn, sn := o.ClientNode, o.ServerNode
	for _, role := range []struct {
		flag, byName, expr string
		node               *string
		avoid              func() string
	}{
		{"--client-node-selector", "--client-node", o.ClientSelector, &cn, func() string { return "" }},
		{"--server-node-selector", "--server-node", o.ServerSelector, &sn, func() string { return cn }},
	} {
		if role.expr == "" {
			continue
		}
		if *role.node != "" {
			return nil, &FlagError{fmt.Sprintf("%s and %s: give one of them", role.byName, role.flag)}
		}
		rs, err := labels.Parse(role.expr)
		if err != nil {
			return nil, &FlagError{fmt.Sprintf("%s %q: %v", role.flag, role.expr, err)}
		}
		if *role.node, err = PickNode(role.flag, rs, nodes, states, role.avoid()); err != nil {
			return nil, err
		}
	}
	pl, err := PlanScenarios(o.Scenarios, states, cn, sn)
	if err != nil {
		return nil, err
	}
	for i := range pl {
		if pl[i].Hairpin && pl[i].Skip == "" {
			pl[i].Skip = HairpinSkip(cl.Version)
		}
	}
	engines := o.engines()
	pl, engineSkips, steps := planEngines(pl, engines, o.Repeats)
	if len(steps) == 0 {
		var why []string
		for _, p := range pl {
			why = append(why, p.Scenario+": "+p.Skip)
		}
		return nil, fmt.Errorf("no scenario can run on this cluster (%s)", strings.Join(why, "; "))
	}
	if o.Services != 0 {
		svc := false
		for _, p := range pl {
			svc = svc || (p.ViaService && p.Skip == "")
		}
		if !svc {
			return nil, &ServicesError{fmt.Sprintf("--services %d: needs the %s scenario, which this run does not measure", o.Services, ScenarioService)}
		}
		if err := CheckServices(ctx, r.Client, o.Namespace, o.Services); err != nil {
			return nil, err
		}
	}
	return &Plan{RunID: r.RunID, Namespace: o.Namespace, Cluster: cl, Placements: pl, Engines: engines,
		EngineSkips: engineSkips, Steps: steps, nodes: nodes}, nil
}

// Sample is the outcome of one client pod.
type Sample struct {
	Seq int `json:"seq"`
	Step
	Pod     string           `json:"pod"`
	Target  string           `json:"target"`
	Results []*result.Result `json:"results,omitempty"`
	// Profiles are the client's window profiles (--profile), one per result.
	Profiles []*result.WindowProfile `json:"profiles,omitempty"`
	// Error says why this pod gave no results; "" when it did.
	Error string `json:"error,omitempty"`
}

// Execute runs the plan: it creates the namespace (if missing), one server
// per scenario (and the Service), then the client pods one at a time in
// the plan's interleaved order, handing each outcome to onSample. Whatever
// it created is deleted when it returns — on success, on error, and when
// ctx is cancelled (Ctrl-C) — unless o.Keep. A client pod that fails is
// recorded as a failed sample and the run goes on; the returned error then
// counts the failures.
func (r *Runner) Execute(ctx context.Context, plan *Plan, o Options, onSample func(Sample) error) (err error) {
	o.defaults()
	cs := r.Client
	ns := o.Namespace
	po := o.podOptions(plan.RunID)
	createdNS := false
	fmt.Fprintf(o.Log, "run %s in namespace %s on %s\n", plan.RunID, ns, plan.Cluster.Summary())
	defer func() {
		if o.Keep {
			fmt.Fprintf(o.Log, "keeping the run's objects (--keep); remove them with: cnibench k8s clean\n")
			return
		}
		// Cleanup must run even when ctx is already cancelled by Ctrl-C;
		// thousands of filler Services take their time.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute+time.Duration(o.Services)*20*time.Millisecond)
		defer cancel()
		if cerr := r.deleteRun(cctx, ns, plan.RunID, createdNS); cerr != nil {
			cerr = fmt.Errorf("cleanup incomplete (run `cnibench k8s clean`): %w", cerr)
			if err == nil {
				err = cerr
			} else {
				err = fmt.Errorf("%w; %v", err, cerr)
			}
		}
	}()
	createdNS, err = r.ensureNamespace(ctx, ns, plan.RunID, o.ReadyTimeout)
	if err != nil {
		return err
	}
	// A per-run token: the servers answer only this run's clients, which
	// matters most for the host-network server, reachable from the node's
	// whole network.
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, TokenSecret(po, newToken()), metav1.CreateOptions{}); err != nil {
		return APIError("create", "token secret", err)
	}

	targets := map[string]string{}
	var runnable []Placement
	var nodes []string
	seenNode := map[string]bool{}
	for _, p := range plan.Placements {
		if p.Skip == "" {
			runnable = append(runnable, p)
			for _, n := range []string{p.ClientNode, p.ServerNode} {
				if !seenNode[n] {
					seenNode[n] = true
					nodes = append(nodes, n)
				}
			}
		} else {
			fmt.Fprintf(o.Log, "%s: skipped: %s\n", p.Scenario, p.Skip)
		}
	}
	plan.Cluster.ApplyProbes(r.probeNodes(ctx, po, nodes, o.ReadyTimeout), plan.nodes)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted while probing the nodes: %w", err)
	}
	fmt.Fprintf(o.Log, "probed %s: %s\n", strings.Join(nodes, ", "), plan.Cluster.Summary())
	if o.OnProbed != nil {
		if err := o.OnProbed(plan.Cluster); err != nil {
			return err
		}
	}
	if o.Services > 0 {
		t0 := time.Now()
		err := createFillers(ctx, r.bulk(), po, o.Services, func(done int) {
			fmt.Fprintf(o.Log, "filler services: %d of %d created\n", done, o.Services)
		})
		if err != nil {
			return fmt.Errorf("creating %d filler services: %w", o.Services, err)
		}
		d := time.Since(t0)
		fmt.Fprintf(o.Log, "filler services: %d Services + EndpointSlices created in %.1fs (%s)\n", o.Services, d.Seconds(), fillerRate(o.Services, d))
	}
	var meters *agentMeters
	if o.AgentCPU {
		life := int64(len(plan.Steps))*int64((o.MeasureTimeout+o.ReadyTimeout).Seconds()) + 2*int64(o.ReadyTimeout.Seconds())
		meters = r.startMeters(ctx, po, nodes, plan.Cluster.Probes, o.ReadyTimeout, life, o.Log)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted while starting the agent meters: %w", err)
		}
	}
	// Scenarios that need the same server share its pod (see serverKey).
	owner := map[string]string{}    // server key -> scenario whose pod it is
	serverOf := map[string]string{} // scenario -> that scenario
	var servers []Placement
	for _, p := range runnable {
		if p.Hairpin {
			continue
		}
		k := p.serverKey()
		if own, ok := owner[k]; ok {
			serverOf[p.Scenario] = own
			continue
		}
		owner[k], serverOf[p.Scenario] = p.Scenario, p.Scenario
		servers = append(servers, p)
	}
	var svcCreated time.Time
	for _, p := range servers {
		for _, e := range plan.serverEngines(p) {
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, serverPodFor(po, p, e), metav1.CreateOptions{}); err != nil {
				return APIError("create", "server pod for "+p.Scenario, err)
			}
			if p.ViaService {
				// Created after the fillers, so that the node rules that
				// carry it were written with every filler in place too.
				if _, err := cs.CoreV1().Services(ns).Create(ctx, ServiceSpec(po.forEngine(e)), metav1.CreateOptions{}); err != nil {
					return APIError("create", "service", err)
				}
				svcCreated = time.Now()
			}
		}
	}
	for _, p := range servers {
		for _, e := range plan.serverEngines(p) {
			name := serverPodFor(po, p, e).Name
			pod, err := r.waitPod(ctx, ns, name, o.ReadyTimeout, podReady)
			if err != nil {
				return fmt.Errorf("%s: server pod %s: %w", p.Scenario, name, err)
			}
			key := targetKey(p.Scenario, e)
			targets[key] = pod.Status.PodIP
			if p.ViaService {
				ip, err := r.waitService(ctx, ns, ServiceName(plan.RunID), pod.Status.PodIP, o.ReadyTimeout)
				if err != nil {
					return fmt.Errorf("%s: %w", p.Scenario, err)
				}
				targets[key] = ip
				// No API says a node's service rules are in place; with
				// thousands of Services writing them takes seconds to
				// minutes, so ask the client's node itself.
				if err := r.waitDataplane(ctx, po.forEngine(e), p, ip, o.MeasureTimeout); err != nil {
					return fmt.Errorf("%s: %w", p.Scenario, err)
				}
				fmt.Fprintf(o.Log, "%s: ClusterIP %s answers from %s %.1fs after the Service was created (%d other Services)\n",
					p.Scenario, ip, p.ClientNode, time.Since(svcCreated).Seconds(), o.Services)
			}
			fmt.Fprintf(o.Log, "%s: server %s ready on %s, target %s\n", p.Scenario, name, pod.Spec.NodeName, targets[key])
		}
	}
	for _, p := range runnable {
		own := serverOf[p.Scenario]
		if own == "" || own == p.Scenario {
			continue
		}
		// The sharer has the owner's engines: only the service scenario
		// (its own key) skips engines.
		for _, e := range plan.serverEngines(p) {
			targets[targetKey(p.Scenario, e)] = targets[targetKey(own, e)]
		}
		fmt.Fprintf(o.Log, "%s: measures against the server of %s, target %s\n", p.Scenario, own, targets[targetKey(own, "")])
	}

	if o.SettleIdle > 0 {
		if err := r.settle(ctx, po, o, clientNodes(runnable)); err != nil {
			return err
		}
	}

	failed, total := 0, 0
	var firstFail string
	for i, st := range plan.Steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted after %d of %d client pods: %w", i, len(plan.Steps), err)
		}
		var s Sample
		if st.Hairpin {
			s = r.measureHairpin(ctx, po, o, st)
		} else {
			s = r.measure(ctx, po, o, st, targets[targetKey(st.Scenario, st.Engine)])
		}
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted after %d of %d client pods: %w", i, len(plan.Steps), ctx.Err())
		}
		s.Seq = i + 1
		if meters != nil && s.Error == "" {
			meters.fold(ctx, r, ns, &s)
		}
		total++
		if s.Error != "" {
			failed++
			if firstFail == "" {
				firstFail = s.Pod + ": " + s.Error
			}
			fmt.Fprintf(o.Log, "[%d/%d] %s repeat %d: FAILED: %s\n", s.Seq, len(plan.Steps), st.armName(), st.Repeat, s.Error)
		} else {
			fmt.Fprintf(o.Log, "[%d/%d] %s repeat %d: %d result(s)%s\n", s.Seq, len(plan.Steps), st.armName(), st.Repeat, len(s.Results), brief(s.Results))
		}
		if onSample != nil {
			if err := onSample(s); err != nil {
				return err
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d client pods failed; first: %s", failed, total, firstFail)
	}
	return nil
}

// brief shows the primary figure of the first result, so the progress log
// says at a glance that numbers are coming back.
func brief(rs []*result.Result) string {
	if len(rs) == 0 {
		return ""
	}
	m := result.PrimaryMetric(rs[0].Test)
	if v, ok := m.Get(rs[0]); ok {
		return fmt.Sprintf(" (%s %dB: %.4g %s)", rs[0].Test, rs[0].MsgSizeBytes, v, m.Unit)
	}
	return ""
}

// measureHairpin runs one hairpin repeat: its Service, then its pod.
func (r *Runner) measureHairpin(ctx context.Context, po PodOptions, o Options, st Step) Sample {
	ip, del, err := r.hairpinTarget(ctx, po, st.Repeat)
	if err != nil {
		return Sample{Step: st, Pod: ClientName(po.RunID, st.Scenario, st.Repeat), Error: err.Error()}
	}
	defer del()
	return r.measure(ctx, po, o, st, ip)
}

// measure runs one client pod to completion and reads its results.
func (r *Runner) measure(ctx context.Context, po PodOptions, o Options, st Step, target string) Sample {
	s := Sample{Step: st, Target: target}
	// The API rejects a deadline of 0; a sub-second budget still gets one.
	deadline := max(1, int64(o.MeasureTimeout.Seconds()))
	pod := ClientPod(po.forEngine(st.Engine), st.Placement, st.Repeat, target, o.clientArgs(st.Engine), deadline)
	if st.Hairpin {
		// The wait for the ClusterIP happens before the pod counts as
		// started, so it shares the ready timeout. Its server is the
		// built-in engine's (engineSkip keeps the tools off hairpin).
		pod = HairpinPod(po, st.Placement, st.Repeat, target, o.clientArgs(st.Engine), deadline+int64(o.ReadyTimeout.Seconds()), o.ReadyTimeout)
	}
	s.Pod = pod.Name
	cs := r.Client
	if _, err := cs.CoreV1().Pods(po.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		s.Error = APIError("create", "client pod", err).Error()
		return s
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = cs.CoreV1().Pods(po.Namespace).Delete(dctx, pod.Name, metav1.DeleteOptions{})
	}()
	// Two stages, so an image or scheduling problem is reported after the
	// ready timeout rather than after the much longer measurement timeout.
	if _, err := r.waitPod(ctx, po.Namespace, pod.Name, o.ReadyTimeout, podStarted); err != nil {
		s.Error = err.Error()
		return s
	}
	done, err := r.waitPod(ctx, po.Namespace, pod.Name, o.MeasureTimeout, podFinished)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	logs, lerr := r.logs(ctx, po.Namespace, pod.Name, containerName)
	if done.Status.Phase == corev1.PodFailed {
		msg := Explain(done, nil)
		if lerr == nil && len(logs) > 0 {
			msg += "; log: " + lastLine(logs)
		}
		s.Error = oneLine(msg)
		return s
	}
	if lerr != nil {
		s.Error = APIError("read", "log of "+pod.Name, lerr).Error()
		return s
	}
	set, err := ParseClientLog(logs)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	if len(set.Results) == 0 {
		s.Error = "the client printed a result set with no results"
		return s
	}
	s.Results = set.Results
	s.Profiles = set.Profiles
	return s
}

func (r *Runner) logs(ctx context.Context, ns, pod, container string) ([]byte, error) {
	return r.logsOpt(ctx, ns, pod, &corev1.PodLogOptions{Container: container})
}

func (r *Runner) logsOpt(ctx context.Context, ns, pod string, o *corev1.PodLogOptions) ([]byte, error) {
	if r.Logs != nil {
		return r.Logs(ctx, ns, pod, o.Container)
	}
	return r.Client.CoreV1().Pods(ns).GetLogs(pod, o).DoRaw(ctx)
}

func (r *Runner) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return 500 * time.Millisecond
}

// podCond decides whether a pod has reached the wanted state.
type podCond func(*corev1.Pod) bool

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podStarted(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning || podFinished(p)
}

func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// waitPod polls the pod until cond holds. It gives up early when the pod
// can no longer get there (image missing, crash loop, failed — unless a
// failed pod is what cond accepts), and on timeout; either way the error is
// one line built from the pod's status and events.
func (r *Runner) waitPod(ctx context.Context, ns, name string, timeout time.Duration, cond podCond) (*corev1.Pod, error) {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(r.poll())
	defer t.Stop()
	for {
		pod, err := r.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			return nil, APIError("get", "pod "+name, err)
		case cond(pod):
			return pod, nil
		case hopeless(pod):
			return nil, errors.New(r.explain(ctx, pod))
		case time.Now().After(deadline):
			return nil, fmt.Errorf("not ready after %s: %s", timeout, r.explain(ctx, pod))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// explain fetches the pod's events and summarises; events are a best
// effort (RBAC may hide them), the pod status alone often suffices.
func (r *Runner) explain(ctx context.Context, pod *corev1.Pod) string {
	ev, err := r.Client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod.Name,
	})
	var items []corev1.Event
	if err == nil {
		items = ev.Items
	}
	msg := Explain(pod, items)
	// A crashing container usually says why on its last line.
	if c, previous := crashed(pod); c != "" {
		if b, err := r.logsOpt(ctx, pod.Namespace, pod.Name, &corev1.PodLogOptions{Container: c, Previous: previous}); err == nil && len(bytes.TrimSpace(b)) > 0 {
			msg = oneLine(msg + "; log: " + lastLine(b))
		}
	}
	return msg
}

// crashed names a container that exited non-zero, and whether that was a
// previous instance (restarted since).
func crashed(p *corev1.Pod) (container string, previous bool) {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return cs.Name, false
			}
			if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
				return cs.Name, true
			}
		}
	}
	return "", false
}

// waitService waits until the Service has a ClusterIP and its
// EndpointSlice lists the server pod as ready, then gives kube-proxy (or
// the CNI's load balancer) a moment to program the node: there is no API
// that says a node's rules are in place.
func (r *Runner) waitService(ctx context.Context, ns, name, podIP string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		svc, err := r.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", APIError("get", "service "+name, err)
		}
		sl, err := r.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return "", APIError("list", "endpointslices of "+name, err)
		}
		if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone && sliceHasReady(sl.Items, podIP) {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(min(2*time.Second, 4*r.poll())):
			}
			return ip, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("service %s: no ready endpoint for %s after %s (is an endpoint controller running?)", name, podIP, timeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(r.poll()):
		}
	}
}

func sliceHasReady(slices []discoveryv1.EndpointSlice, ip string) bool {
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if a == ip {
					return true
				}
			}
		}
	}
	return false
}

// ensureNamespace creates the namespace unless it exists. It waits out a
// namespace still terminating from an earlier run, since nothing can be
// created in it. It reports whether this run created it (and so deletes it).
func (r *Runner) ensureNamespace(ctx context.Context, ns, id string, timeout time.Duration) (bool, error) {
	api := r.Client.CoreV1().Namespaces()
	deadline := time.Now().Add(timeout)
	for {
		cur, err := api.Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err := api.Create(ctx, NamespaceSpec(ns, id), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return false, APIError("create", "namespace "+ns, err)
			}
			return true, nil
		case apierrors.IsForbidden(err):
			// Allowed into the namespace but not to read namespaces:
			// use it as it is; creating pods will tell if it is missing.
			return false, nil
		case err != nil:
			return false, APIError("get", "namespace "+ns, err)
		case cur.Status.Phase != corev1.NamespaceTerminating:
			return false, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("namespace %s is still terminating after %s; wait, or pass --namespace", ns, timeout)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(r.poll()):
		}
	}
}

// deleteRun removes the run's objects; "not found" counts as removed, so it
// is safe to call twice.
func (r *Runner) deleteRun(ctx context.Context, ns, id string, deleteNS bool) error {
	err := deleteLabeled(ctx, r.bulk(), ns, RunSelector(id))
	if err == nil {
		// Pods linger while their containers stop; wait, so that the
		// command returns with the cluster as it found it.
		err = r.waitPodsGone(ctx, ns, RunSelector(id))
	}
	if deleteNS {
		if derr := r.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
			err = errors.Join(err, APIError("delete", "namespace "+ns, derr))
		}
	}
	return err
}

// waitPodsGone polls until no pod matches selector in ns, or ctx ends.
func (r *Runner) waitPodsGone(ctx context.Context, ns, selector string) error {
	for {
		pods, err := r.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return APIError("list", "pods", err)
		}
		if len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pod(s) still terminating, e.g. %s", len(pods.Items), pods.Items[0].Name)
		case <-time.After(r.poll()):
		}
	}
}

// deleteLabeled deletes the pods, services and daemonsets in ns (all
// namespaces when ns is "") that match selector.
func deleteLabeled(ctx context.Context, cs kubernetes.Interface, ns, selector string) error {
	lo := metav1.ListOptions{LabelSelector: selector}
	bg := metav1.DeletePropagationBackground
	do := metav1.DeleteOptions{PropagationPolicy: &bg}
	var errs []error
	gone := func(what string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, APIError("delete", what, err))
		}
	}
	if ds, err := cs.AppsV1().DaemonSets(ns).List(ctx, lo); err != nil {
		gone("daemonsets", err)
	} else {
		for _, d := range ds.Items {
			gone("daemonset "+d.Namespace+"/"+d.Name, cs.AppsV1().DaemonSets(d.Namespace).Delete(ctx, d.Name, do))
		}
	}
	if secs, err := cs.CoreV1().Secrets(ns).List(ctx, lo); err != nil {
		gone("secrets", err)
	} else {
		for _, s := range secs.Items {
			gone("secret "+s.Namespace+"/"+s.Name, cs.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, do))
		}
	}
	if svcs, err := cs.CoreV1().Services(ns).List(ctx, lo); err != nil {
		gone("services", err)
	} else {
		// Many at once: a run with --services has thousands.
		byNS := map[string][]string{}
		for _, s := range svcs.Items {
			byNS[s.Namespace] = append(byNS[s.Namespace], s.Name)
		}
		for n, names := range byNS {
			api := cs.CoreV1().Services(n)
			gone("services in "+n, deleteAll(ctx, names, lo,
				func(ctx context.Context) error { return deleteServiceCollection(ctx, cs, n, lo) },
				func(ctx context.Context) ([]string, error) { return objectNames(api.List(ctx, lo)) },
				func(ctx context.Context, name string) error { return api.Delete(ctx, name, do) }))
		}
	}
	gone("endpointslices", deleteSlices(ctx, cs, ns, selector))
	if pods, err := cs.CoreV1().Pods(ns).List(ctx, lo); err != nil {
		gone("pods", err)
	} else {
		for _, p := range pods.Items {
			gone("pod "+p.Namespace+"/"+p.Name, cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, do))
		}
	}
	return errors.Join(errs...)
}

// Clean deletes every object and namespace any cnibench run created, in
// every namespace, and waits up to wait for the namespaces to be gone (0 =
// do not wait). It returns what it deleted, as kind/namespace/name.
func Clean(ctx context.Context, cs kubernetes.Interface, wait, poll time.Duration) ([]string, error) {
	lo := metav1.ListOptions{LabelSelector: ManagedSelector}
	var removed []string
	nss, err := cs.CoreV1().Namespaces().List(ctx, lo)
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, APIError("list", "namespaces", err)
	}
	// Objects first, by listing: a namespace we may not list or delete can
	// still hold cnibench objects we may delete.
	objs := listObjects(ctx, cs, lo, labeledKinds)
	if err := deleteLabeled(ctx, cs, "", ManagedSelector); err != nil {
		return nil, err
	}
	removed = append(removed, objs...)
	var pending []string
	if nss != nil {
		for _, n := range nss.Items {
			if err := cs.CoreV1().Namespaces().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return removed, APIError("delete", "namespace "+n.Name, err)
			}
			removed = append(removed, "namespace/"+n.Name)
			pending = append(pending, n.Name)
		}
	}
	if wait <= 0 || len(pending) == 0 {
		return removed, nil
	}
	deadline := time.Now().Add(wait)
	for len(pending) > 0 {
		var still []string
		for _, n := range pending {
			if _, err := cs.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{}); err == nil {
				still = append(still, n)
			} else if !apierrors.IsNotFound(err) {
				return removed, APIError("get", "namespace "+n, err)
			}
		}
		pending = still
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return removed, fmt.Errorf("namespaces still terminating after %s: %s", wait, strings.Join(pending, ", "))
		}
		select {
		case <-ctx.Done():
			return removed, ctx.Err()
		case <-time.After(poll):
		}
	}
	return removed, nil
}

// newToken is 32 random bytes, hex: the run's engine token.
func newToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}
