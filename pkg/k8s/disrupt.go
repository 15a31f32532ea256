package k8s

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cnibench/cnibench/pkg/disrupt"
	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/runid"
)

// `cnibench k8s disrupt`: pkg/disrupt's timelines on a real cluster. An
// echo pod on one node and one probe pod per probe on another run the
// open-loop probes of pkg/disrupt (udp-rr, tcp-crr) against the echo's
// pod IP or a ClusterIP Service in front of it, optionally behind N
// filler Services, while the runner makes changes through the API at
// planned instants (disrupt_events.go). The probe pods print their
// requests when they end; the runner cuts them into pkg/disrupt's
// timeline with the events marked, so the text, JSON and HTML output and
// the comparisons are the lab's. One run is one arm, named after the
// cluster's datapath and kube-proxy mode; --against adds an earlier run's
// arms, to compare with.
//
// Instants: the probes stamp their requests with the probe pod's clock,
// the events are stamped with the runner's; the probes start at an
// absolute instant (--t0) the runner chooses, so the two clocks must agree
// to well within a bucket (on k8slab pods share the host's clock; on a
// real cluster the nodes and the runner's machine must be NTP-synced).

const (
	scenarioDisrupt   = "disrupt"
	roleDisruptEcho   = "disrupt-echo"
	roleDisruptProbe  = "disrupt-probe"
	roleDisruptObject = "disrupt-object"
	// Target modes (--target).
	DisruptTargetPod     = "pod"
	DisruptTargetService = "service"
	// maxDisruptEvents bounds the event firings of one run (repeats ×
	// events): the probes' log grows with the run's length.
	maxDisruptEvents = 200
)

// DisruptOptions configure one `k8s disrupt` run.
type DisruptOptions struct {
	Namespace  string
	Image      string
	PullPolicy corev1.PullPolicy
	Probes     []disrupt.ProbeSpec
	// Target is DisruptTargetPod or DisruptTargetService.
	Target string
	// Services is how many filler Services the cluster holds meanwhile.
	Services int
	// Events fire in this order, Repeats times; Settle is probing before
	// the first, Spacing from one to the next, Bucket the resolution.
	Events                  []string
	Repeats                 int
	Settle, Spacing, Bucket time.Duration
	// StartDelay is from the probe pods' creation to the probes' first
	// request: they must be running by then.
	StartDelay time.Duration
	// AgentSelector labels the agent's pods agent-restart deletes;
	// RestartCmd, if set, restarts it instead (an agent run outside pods).
	AgentSelector, RestartCmd string
	// BlackholeFor is how long each blackhole event holds.
	BlackholeFor           time.Duration
	ClientNode, ServerNode string
	// Arm names the run's arm; "" names it after the cluster.
	Arm          string
	ReadyTimeout time.Duration
	// OnProbed is called once the nodes are probed, before anything else
	// is created.
	OnProbed func(*Cluster) error
	Keep     bool
	Log      io.Writer
}

// disruptSlot is one planned firing.
type disruptSlot struct {
	at time.Duration // after t0
	n  int           // firing number of its kind
	ev *kubeEvent
}

// planned is how long the probes run: the settle, every slot and a whole
// spacing after the last.
func (o DisruptOptions) planned() time.Duration {
	return o.Settle + time.Duration(len(o.Events)*o.Repeats)*o.Spacing + o.Spacing
}

// Disrupt runs the probes on cl's nodes while the events fire, and
// returns the arm: one timeline per probe. Whatever it created is deleted
// on every path out (unless o.Keep); a change still in place when it
// fails or is interrupted is undone first.
func (r *Runner) Disrupt(ctx context.Context, cl *Cluster, nodes []corev1.Node, o DisruptOptions) (_ *disrupt.ArmResult, err error) {
	podDefaults(&o.Namespace, &o.PullPolicy, &o.Log)
	if r.RunID == "" {
		r.RunID = runid.New()
	}
	client, server, err := disruptNodes(nodes, o.ClientNode, o.ServerNode)
	if err != nil {
		return nil, err
	}
	po := PodOptions{RunID: r.RunID, Namespace: o.Namespace, Image: o.Image, PullPolicy: o.PullPolicy, Port: disrupt.ProbePort}
	env := &disruptEnv{r: r, po: po, server: server, fillers: o.Services, svcIndex: (o.Services - 1) / 2,
		agentSel: o.AgentSelector, restartCmd: o.RestartCmd, blackholeFor: o.BlackholeFor, poll: 100 * time.Millisecond}
	if r.Poll > 0 {
		env.poll = r.Poll
	}
	if slices.Contains(o.Events, AgentRestart) && o.RestartCmd == "" {
		// Before anything is created: a cluster whose agent is no pod
		// is told so at once.
		if _, err := env.agentPod(ctx); err != nil {
			return nil, err
		}
	}
	createdNS := false
	defer func() {
		err = r.cleanUp(ctx, Options{Namespace: o.Namespace, Keep: o.Keep, Services: o.Services, Log: o.Log}, r.RunID, createdNS, err)
	}()
	if createdNS, err = r.ensureNamespace(ctx, o.Namespace, r.RunID, o.ReadyTimeout); err != nil {
		return nil, err
	}
	metered := uniq(client, server)
	nodeProbes := r.probeNodes(ctx, po, metered, o.ReadyTimeout, false)
	cl.ApplyProbes(nodeProbes, nodes)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted while probing the nodes: %w", err)
	}
	env.cni = cl.CNI
	arm := o.Arm
	if arm == "" {
		arm = DisruptArmName(cl)
	}
	fmt.Fprintf(o.Log, "disrupt run %s: client %s, server %s; %s\n", r.RunID, client, server, cl.Summary())
	if o.OnProbed != nil {
		if err := o.OnProbed(cl); err != nil {
			return nil, err
		}
	}
	var slots []disruptSlot
	kinds := map[string]*kubeEvent{}
	for rep := 0; rep < o.Repeats; rep++ {
		for _, k := range o.Events {
			if kinds[k] == nil {
				if kinds[k], err = newKubeEvent(k, env); err != nil {
					return nil, err
				}
			}
			slots = append(slots, disruptSlot{at: o.Settle + time.Duration(len(slots))*o.Spacing, n: rep, ev: kinds[k]})
		}
	}
	if o.Services > 0 {
		t0 := time.Now()
		if err := createFillers(ctx, r.bulk(), po, o.Services, func(done int) {
			fmt.Fprintf(o.Log, "filler services: %d of %d created\n", done, o.Services)
		}); err != nil {
			return nil, fmt.Errorf("creating %d filler services: %w", o.Services, err)
		}
		fmt.Fprintf(o.Log, "filler services: %d created in %.1fs\n", o.Services, time.Since(t0).Seconds())
	}
	target, err := r.disruptTarget(ctx, o, po, client, server, env)
	if err != nil {
		return nil, err
	}

	dur := o.planned()
	// The agent meters run from before the probes start until after
	// they end; a node whose meter cannot start is recorded with why.
	meters := r.startMeters(ctx, po, metered, nodeProbes, o.ReadyTimeout,
		int64((o.StartDelay + dur + 2*o.ReadyTimeout + time.Minute).Seconds()), o.Log)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted while starting the agent meters: %w", err)
	}
	t0 := time.Now().Add(o.StartDelay)
	var probes []string
	for _, p := range o.Probes {
		pod := disruptProbePod(po, client, p, target, t0, dur)
		if _, err := r.Client.CoreV1().Pods(po.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, APIError("create", "probe pod "+pod.Name, err)
		}
		probes = append(probes, pod.Name)
	}
	var holes []time.Duration
	for _, sl := range slots {
		if sl.ev.kind == Blackhole {
			holes = append(holes, sl.at)
		}
	}
	if len(holes) > 0 {
		if err := r.startBlackhole(ctx, po, env.serverPod.Name, t0, holes, o.BlackholeFor); err != nil {
			return nil, err
		}
	}
	for _, name := range probes {
		if _, err := r.waitPod(ctx, po.Namespace, name, max(time.Until(t0), time.Millisecond), podStarted); err != nil {
			return nil, fmt.Errorf("probe pod %s not running by the probes' start, %s after it was created (raise --start-delay): %w", name, o.StartDelay, err)
		}
	}
	fmt.Fprintf(o.Log, "probing %s from %s for %s: %d events\n", target, client, dur, len(slots))

	ct := watchConntrackMax(ctx)
	defer ct.cancel()
	marks, fireErr := fireSlots(ctx, slots, t0, o.Spacing, dur)
	res := &disrupt.ArmResult{Name: arm, Topology: "k8s", Target: target.String(), LabID: r.RunID,
		Knobs: disruptKnobs(cl, o)}
	if fireErr != nil {
		return nil, fireErr
	}
	if err := env.restored(ctx, o.Events); err != nil {
		return nil, fmt.Errorf("after the events: %w", err)
	}
	res.Restored = true
	reqs := make([][]disrupt.Request, len(probes))
	logs := make([][]byte, len(probes))
	for i, name := range probes {
		if reqs[i], logs[i], err = r.probeRequests(ctx, po.Namespace, name, time.Until(t0.Add(dur))+o.Probes[i].Timeout+o.ReadyTimeout); err != nil {
			return nil, err
		}
	}
	if len(holes) > 0 {
		if err := r.blackholeSpans(ctx, po.Namespace, env.serverPod.Name, t0, marks, o.ReadyTimeout); err != nil {
			return nil, err
		}
	}
	res.ProbeCPUPct, res.ProbeCPUReason = r.probeCPU(ctx, po.Namespace, env.serverPod.Name, logs, t0, t0.Add(dur))
	r.eventAgentCPU(ctx, meters, po.Namespace, metered, t0, dur, marks)
	for i, p := range o.Probes {
		res.Timelines = append(res.Timelines, disrupt.Build(string(p.Kind), p.Rate, p.Timeout, o.Bucket, dur, reqs[i], marks))
	}
	ct.stop(res)
	return res, nil
}

// fireSlots fires each slot at t0+at, and each undo half a spacing later,
// and returns the marks. A change still in place when it fails or ctx
// ends is undone before it returns, whatever ctx says.
func fireSlots(ctx context.Context, slots []disruptSlot, t0 time.Time, spacing, dur time.Duration) (marks []disrupt.Mark, err error) {
	var pending func() error
	defer func() {
		if pending != nil {
			if uerr := pending(); uerr != nil {
				err = errors.Join(err, fmt.Errorf("undo: %w", uerr))
			}
		}
	}()
	mark := func(ev *kubeEvent, label string, f firing) {
		m := disrupt.Mark{Kind: ev.kind, Label: label, Start: f.start.Sub(t0), End: f.end.Sub(t0), Detail: f.detail, AgentCPUReason: ev.noAgent}
		if f.end.IsZero() {
			m.End = m.Start
		}
		marks = append(marks, m)
	}
	for k, sl := range slots {
		if !disrupt.WaitUntil(ctx, t0.Add(sl.at)) {
			return marks, ctx.Err()
		}
		if late := time.Since(t0.Add(sl.at)); late > spacing/2 {
			return marks, fmt.Errorf("event %d (%s) is %s late: the event before took longer than the spacing; raise --spacing", k+1, sl.ev.kind, late.Round(time.Millisecond))
		}
		f, err := sl.ev.fire(ctx, sl.n)
		if sl.ev.undo != nil {
			n, ev := sl.n, sl.ev
			pending = func() error {
				uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				defer cancel()
				_, err := ev.undo(uctx, n)
				return err
			}
		}
		if err != nil {
			return marks, fmt.Errorf("event %d (%s): %w", k+1, sl.ev.kind, err)
		}
		mark(sl.ev, "", f)
		if sl.ev.undo == nil {
			continue
		}
		if !disrupt.WaitUntil(ctx, t0.Add(sl.at+spacing/2)) {
			return marks, ctx.Err()
		}
		f, err = sl.ev.undo(ctx, sl.n)
		if err != nil {
			return marks, fmt.Errorf("event %d (%s) revert: %w", k+1, sl.ev.kind, err)
		}
		pending = nil
		mark(sl.ev, "revert", f)
	}
	if n := len(marks); n > 0 && marks[n-1].End > dur-spacing/2 {
		return marks, fmt.Errorf("the last event ended %s after the probes' start, too close to their end (%s): raise --spacing", marks[n-1].End.Round(time.Millisecond), dur)
	}
	return marks, nil
}

// disruptTarget starts the echo pod on the server's node and returns what
// the probes dial: its pod IP, or a ClusterIP Service's once the client's
// node forwards it.
func (r *Runner) disruptTarget(ctx context.Context, o DisruptOptions, po PodOptions, client, server string, env *disruptEnv) (netip.AddrPort, error) {
	echo := disruptEchoPod(po, server)
	if _, err := r.Client.CoreV1().Pods(po.Namespace).Create(ctx, echo, metav1.CreateOptions{}); err != nil {
		return netip.AddrPort{}, APIError("create", "echo pod", err)
	}
	got, err := r.waitPod(ctx, po.Namespace, echo.Name, o.ReadyTimeout, podReady)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("echo pod %s: %w", echo.Name, err)
	}
	env.serverPod = got
	addr := got.Status.PodIP
	if o.Target == DisruptTargetService {
		svc := disruptService(po)
		if _, err := r.Client.CoreV1().Services(po.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return netip.AddrPort{}, APIError("create", "service", err)
		}
		if addr, err = r.waitService(ctx, po.Namespace, svc.Name, got.Status.PodIP, o.ReadyTimeout); err != nil {
			return netip.AddrPort{}, err
		}
		if err := r.waitDataplane(ctx, po, Placement{Scenario: scenarioDisrupt, ClientNode: client}, addr, o.ReadyTimeout); err != nil {
			return netip.AddrPort{}, err
		}
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil || !ip.Is4() {
		return netip.AddrPort{}, fmt.Errorf("target address %q: the probes take IPv4 only", addr)
	}
	return netip.AddrPortFrom(ip, disrupt.ProbePort), nil
}

// probeRequests waits (up to wait) until a probe pod has ended and reads
// its requests from its log; the log is returned too, for its CPU lines.
func (r *Runner) probeRequests(ctx context.Context, ns, name string, wait time.Duration) ([]disrupt.Request, []byte, error) {
	done, err := r.waitPod(ctx, ns, name, wait, podFinished)
	if err != nil {
		return nil, nil, fmt.Errorf("probe pod %s: %w", name, err)
	}
	b, err := r.logs(ctx, ns, name, containerName)
	if err != nil {
		return nil, nil, APIError("read", "log of "+name, err)
	}
	if done.Status.Phase != corev1.PodSucceeded {
		return nil, nil, fmt.Errorf("probe pod %s: %s; log: %s", name, oneLine(Explain(done, nil)), lastLine(b))
	}
	_, reqs, err := disrupt.DecodeRequests(b)
	if err != nil {
		return nil, nil, fmt.Errorf("probe pod %s: %w", name, err)
	}
	return reqs, b, nil
}

// disruptNodes picks the client's and the server's node: the flags', else
// the first two usable nodes by name (one node serves both when it is the
// only one).
func disruptNodes(nodes []corev1.Node, client, server string) (string, string, error) {
	var usable []string
	for _, st := range NodeStatesFor(nodes, nil, false) {
		if st.Unusable == "" {
			usable = append(usable, st.Name)
		}
	}
	if len(usable) == 0 {
		return "", "", fmt.Errorf("no usable node (nodes: %s)", describeNodes(NodeStatesFor(nodes, nil, false)))
	}
	for _, f := range []struct{ flag, name string }{{"--client-node", client}, {"--server-node", server}} {
		if f.name != "" && !slices.Contains(usable, f.name) {
			return "", "", errkind.Errorf(ErrInvalid, "%s %s: not a usable node (nodes: %s)", f.flag, f.name, describeNodes(NodeStatesFor(nodes, nil, false)))
		}
	}
	if client == "" {
		client = usable[0]
		if client == server && len(usable) > 1 {
			client = usable[1]
		}
	}
	if server == "" {
		server = client
		for _, n := range usable {
			if n != client {
				server = n
				break
			}
		}
	}
	return client, server, nil
}

func uniq(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

// DisruptArmName names a run's arm after the cluster: the CNI's name and
// kube-proxy's mode, e.g. flannel-iptables.
func DisruptArmName(cl *Cluster) string {
	parts := []string{"k8s"}
	if f := strings.Fields(cl.CNI); len(f) > 0 && !strings.HasPrefix(cl.CNI, "unknown") {
		parts[0] = f[0]
	}
	if cl.KubeProxyMode != "" {
		parts = append(parts, strings.Fields(cl.KubeProxyMode)[0])
	}
	return strings.Join(parts, "-")
}

// disruptKnobs records what the arm ran with, as the lab's arms do.
func disruptKnobs(cl *Cluster, o DisruptOptions) map[string]string {
	k := map[string]string{"cni": cl.CNI, "services": strconv.Itoa(o.Services), "target": o.Target}
	if cl.KubeProxyMode != "" {
		k["proxy"] = cl.KubeProxyMode
	}
	if cl.Datapath != "" {
		k["datapath"] = cl.Datapath
	}
	if o.RestartCmd != "" {
		k["restart_cmd"] = o.RestartCmd
	} else if slices.Contains(o.Events, AgentRestart) {
		k["agent"] = o.AgentSelector
	}
	return k
}

// disruptEchoPod runs `cnibench k8s disrupt-agent --echo` on node, Ready once its
// TCP port accepts.
func disruptEchoPod(po PodOptions, node string) *corev1.Pod {
	pod := po.basePod(runid.Name(po.RunID, "echo"), scenarioDisrupt, roleDisruptEcho, Placement{}, node)
	c := &pod.Spec.Containers[0]
	c.Args = []string{"k8s", "disrupt-agent", "--echo", strconv.Itoa(disrupt.ProbePort)}
	c.Ports = []corev1.ContainerPort{
		{Name: "tcp", ContainerPort: disrupt.ProbePort, Protocol: corev1.ProtocolTCP},
		{Name: "udp", ContainerPort: disrupt.ProbePort, Protocol: corev1.ProtocolUDP}}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(disrupt.ProbePort)}},
		PeriodSeconds: 1,
	}
	return pod
}

// disruptService is the ClusterIP Service in front of the echo, TCP and
// UDP.
func disruptService(po PodOptions) *corev1.Service {
	port := func(name string, p corev1.Protocol) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: p, Port: disrupt.ProbePort, TargetPort: intstr.FromInt32(disrupt.ProbePort)}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: runid.Name(po.RunID, "echo"), Namespace: po.Namespace, Labels: po.labels(scenarioDisrupt, "disrupt-service")},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: po.labels(scenarioDisrupt, roleDisruptEcho),
			Ports: []corev1.ServicePort{port("tcp", corev1.ProtocolTCP), port("udp", corev1.ProtocolUDP)}},
	}
}

// disruptProbePod runs one probe from node against target, from t0 for
// dur; it ends by itself and prints its requests.
func disruptProbePod(po PodOptions, node string, p disrupt.ProbeSpec, target netip.AddrPort, t0 time.Time, dur time.Duration) *corev1.Pod {
	pod := po.basePod(runid.Name(po.RunID, "probe-"+string(p.Kind)), scenarioDisrupt, roleDisruptProbe, Placement{}, node)
	pod.Spec.Containers[0].Args = []string{"k8s", "disrupt-agent", "--probe", string(p.Kind) + "=" + strconv.FormatFloat(p.Rate, 'g', -1, 64),
		"--target", target.String(),
		"--timeout", p.Timeout.String(), "--t0", strconv.FormatInt(t0.UnixNano(), 10), "--duration", dur.String()}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	// Its own end, and then some: a stuck probe must not outlive the run.
	pod.Spec.ActiveDeadlineSeconds = ptr(int64((time.Until(t0) + dur + 2*time.Minute).Seconds()))
	return pod
}

// blackholeContainer names the ephemeral container that drops the probes'
// port in the echo pod.
const blackholeContainer = "blackhole"

// startBlackhole adds to the echo pod an ephemeral container that drops
// the probes' port in the pod's network namespace at t0+each of at, for
// hold each time, and waits until it runs (by t0). In the echo's own
// namespace every CNI's traffic meets netfilter: on the nodes, a CNI
// whose programs redirect pod traffic (Cilium's, into and out of its
// tunnel) passes no netfilter hook that sees the probes' port. It runs as
// root with CAP_NET_ADMIN only, and ends after the last hold.
func (r *Runner) startBlackhole(ctx context.Context, po PodOptions, echo string, t0 time.Time, at []time.Duration, hold time.Duration) error {
	pods := r.Client.CoreV1().Pods(po.Namespace)
	pod, err := pods.Get(ctx, echo, metav1.GetOptions{})
	if err != nil {
		return APIError("get", "echo pod "+echo, err)
	}
	var ats []string
	for _, d := range at {
		ats = append(ats, d.String())
	}
	sc := engineSecurity()
	sc.RunAsNonRoot, sc.RunAsUser, sc.RunAsGroup = ptr(false), ptr(int64(0)), ptr(int64(0))
	sc.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: blackholeContainer, Image: po.Image, ImagePullPolicy: po.PullPolicy,
			Args: []string{"k8s", "disrupt-agent", "--blackhole", strconv.Itoa(disrupt.ProbePort), "--table", runid.Name(po.RunID, "blackhole"),
				"--t0", strconv.FormatInt(t0.UnixNano(), 10), "--at", strings.Join(ats, ","), "--hold", hold.String()},
			SecurityContext: sc}})
	if _, err := pods.UpdateEphemeralContainers(ctx, echo, pod, metav1.UpdateOptions{}); err != nil {
		return APIError("add", "blackhole container to "+echo, err)
	}
	if _, err := r.waitPod(ctx, po.Namespace, echo, max(time.Until(t0), time.Millisecond), func(p *corev1.Pod) bool {
		st := ephemeralState(p, blackholeContainer)
		return st.Running != nil || st.Terminated != nil
	}); err != nil {
		return fmt.Errorf("blackhole container of %s not running by the probes' start: %w", echo, err)
	}
	return nil
}

// ephemeralState is the state of p's ephemeral container name.
func ephemeralState(p *corev1.Pod, name string) corev1.ContainerState {
	for _, st := range p.Status.EphemeralContainerStatuses {
		if st.Name == name {
			return st.State
		}
	}
	return corev1.ContainerState{}
}

// blackholeSpans waits for the blackhole container's end and puts its
// spans — when the kernel took each drop rule and when it was gone, on
// the server node's clock — in place of the runner's marks of the
// blackhole events, in order.
func (r *Runner) blackholeSpans(ctx context.Context, ns, echo string, t0 time.Time, marks []disrupt.Mark, wait time.Duration) error {
	done, err := r.waitPod(ctx, ns, echo, wait, func(p *corev1.Pod) bool { return ephemeralState(p, blackholeContainer).Terminated != nil })
	if err != nil {
		return fmt.Errorf("blackhole container of %s: %w", echo, err)
	}
	b, err := r.logs(ctx, ns, echo, blackholeContainer)
	if err != nil {
		return APIError("read", "log of the blackhole container of "+echo, err)
	}
	if code := ephemeralState(done, blackholeContainer).Terminated.ExitCode; code != 0 {
		return fmt.Errorf("blackhole container of %s exited %d: %s", echo, code, lastLine(b))
	}
	spans, err := disrupt.DecodeSpans(b)
	if err != nil {
		return fmt.Errorf("blackhole container of %s: %w", echo, err)
	}
	k := 0
	for i := range marks {
		if marks[i].Kind != Blackhole {
			continue
		}
		if k == len(spans) {
			return fmt.Errorf("blackhole container of %s reported %d holds, the run planned more", echo, len(spans))
		}
		sp := spans[k]
		marks[i].Start, marks[i].End = sp.Start.Sub(t0), sp.End.Sub(t0)
		marks[i].Detail = fmt.Sprintf("port %d (TCP and UDP) dropped in the echo pod for %.1f ms, its own instants", disrupt.ProbePort, ms(sp.End.Sub(sp.Start)))
		k++
	}
	if k != len(spans) {
		return fmt.Errorf("blackhole container of %s reported %d holds, the run planned %d", echo, len(spans), k)
	}
	return nil
}

// DisruptAgent is `cnibench k8s disrupt-agent`, what k8s disrupt's pods
// run: with Echo, pkg/disrupt's echo on that port in the pod's own
// network namespace until ctx ends; with Blackhole, that port dropped in
// the pod's network namespace from T0+each of At for Hold,
// each span printed as it ends; else one Probe ("KIND=RATE") from the
// pod's namespace, its first request at T0 (Unix ns) and its last before
// T0+Duration, its requests printed at the end (disrupt.EncodeRequests).
type DisruptAgent struct {
	Echo              int
	Probe, Target     string
	Timeout, Duration time.Duration
	T0                int64
	Blackhole         int
	Table             string
	At                []time.Duration
	Hold              time.Duration
}

// Run echoes, drops or probes.
func (a DisruptAgent) Run(ctx context.Context, out io.Writer) error {
	if a.Blackhole > 0 {
		return a.blackhole(ctx, out)
	}
	if a.Echo > 0 {
		ec, err := disrupt.StartEcho("", a.Echo)
		if err != nil {
			return err
		}
		defer ec.Close()
		// Its CPU, every CPUEvery until it is deleted: the runner cuts
		// the probing window out of the series.
		tk := time.NewTicker(disrupt.CPUEvery)
		defer tk.Stop()
		for {
			if r, ok := disrupt.ReadSelfCPU(); ok {
				if err := disrupt.WriteCPU(out, r); err != nil {
					return err
				}
			}
			select {
			case <-ctx.Done():
				return nil
			case <-tk.C:
			}
		}
	}
	target, err := netip.ParseAddrPort(a.Target)
	if err != nil || !target.Addr().Is4() {
		return errkind.Errorf(ErrInvalid, "--target %q: want IPv4:PORT", a.Target)
	}
	specs, err := ParseDisruptProbes(a.Probe, a.Timeout)
	if err != nil {
		return err
	}
	if len(specs) != 1 || a.Duration <= 0 || a.T0 <= 0 {
		return errkind.Errorf(ErrInvalid, "--probe %q, --duration %s, --t0 %d: want one probe and a positive duration and start", a.Probe, a.Duration, a.T0)
	}
	t0 := time.Unix(0, a.T0)
	// Started late, an open-loop probe would send what it owes at once.
	if late := time.Since(t0); late > 50*time.Millisecond {
		return fmt.Errorf("started %s after --t0: the runner's start delay was too short for this pod", late.Round(time.Millisecond))
	}
	stop, cancel := context.WithDeadline(ctx, t0.Add(a.Duration))
	defer cancel()
	// Its CPU before the first request and after the last, printed with
	// the requests (one write at the end, so the log holds all or none).
	cpu0, ok0 := disrupt.ReadSelfCPU()
	reqs, err := specs[0].Run(ctx, stop, "", target, t0)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if cpu1, ok1 := disrupt.ReadSelfCPU(); ok0 && ok1 {
		disrupt.WriteCPU(&b, cpu0)
		disrupt.WriteCPU(&b, cpu1)
	}
	if err := disrupt.EncodeRequests(&b, specs[0].Kind, reqs); err != nil {
		return err
	}
	_, err = out.Write(b.Bytes())
	return err
}

// conntrackMaxFile is the host's conntrack limit. On a cluster whose
// nodes are namespaces of the runner's machine (k8slab) it is the nodes'
// limit too: another tenant lowering it while the probes run makes new
// flows drop ("table full"), which is then no event's doing.
const conntrackMaxFile = "/proc/sys/net/netfilter/nf_conntrack_max"

// conntrackWatch samples conntrackMaxFile every 100 ms from the probes'
// start.
type conntrackWatch struct {
	first, min *int
	done       chan struct{}
	cancel     context.CancelFunc
}

func readConntrackMax() *int { return disrupt.ReadProcInt(conntrackMaxFile) }

func watchConntrackMax(ctx context.Context) *conntrackWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &conntrackWatch{first: readConntrackMax(), done: make(chan struct{}), cancel: cancel}
	w.min = w.first
	go func() {
		defer close(w.done)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				if v := readConntrackMax(); v != nil && (w.min == nil || *v < *w.min) {
					w.min = v
				}
			}
		}
	}()
	return w
}

// stop records the limit at the start and the end in the arm, and the
// least seen between as the knob host_conntrack_max_min when lower.
func (w *conntrackWatch) stop(a *disrupt.ArmResult) {
	w.cancel()
	<-w.done
	last := readConntrackMax()
	a.HostConntrackMax = []*int{w.first, last}
	if w.min != nil && (w.first == nil || *w.min < *w.first || last != nil && *w.min < *last) {
		a.Knobs["host_conntrack_max_min"] = strconv.Itoa(*w.min)
	}
}

// blackhole holds the drop rule at each planned instant. A hold is
// lifted on every way out; the kernel deletes the table with the process
// on the ways this code does not see (disrupt.PortBlackhole).
func (a DisruptAgent) blackhole(ctx context.Context, out io.Writer) error {
	if a.Blackhole > 65535 || a.Table == "" || a.T0 <= 0 || len(a.At) == 0 || a.Hold <= 0 {
		return errkind.Errorf(ErrInvalid, "--blackhole %d --table %q --t0 %d --at %v --hold %s: want a port, a table, a start, instants and a hold", a.Blackhole, a.Table, a.T0, a.At, a.Hold)
	}
	t0 := time.Unix(0, a.T0)
	for k, at := range a.At {
		if !disrupt.WaitUntil(ctx, t0.Add(at)) {
			return ctx.Err()
		}
		lift, err := disrupt.PortBlackhole(a.Table, uint16(a.Blackhole))
		if err != nil {
			return err
		}
		start := time.Now()
		held := disrupt.WaitUntil(ctx, start.Add(a.Hold))
		if err := lift(); err != nil {
			return err
		}
		if !held {
			return ctx.Err()
		}
		if err := disrupt.WriteSpan(out, k, disrupt.Span{Start: start, End: time.Now()}); err != nil {
			return err
		}
	}
	return nil
}
