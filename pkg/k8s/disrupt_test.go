package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cnibench/cnibench/pkg/disrupt"
)

// fakeProbed plays the datapath for `k8s disrupt` on a fake cluster: it
// notes when each API change reached the "API server", and the probe
// pods' logs are the requests a probe would have sent from its --t0 for
// its --duration at its rate, every one answered in 100 µs except those
// sent within outage after a change the test says hurts.
type fakeProbed struct {
	mu      sync.Mutex
	changes []fakeChange
	outage  time.Duration
	hurts   func(c fakeChange) bool
	// agentUID counts the kube-proxy pods made (the replacement's UID).
	agentUID int
	// echoAt is when the echo pod was made: its CPU readings start there.
	echoAt time.Time
	// holes are the blackhole pod's spans, from its arguments: every
	// request sent within one times out.
	holes []disrupt.Span
	// blackhole is the ephemeral blackhole container as added.
	blackhole *corev1.EphemeralContainer
}

// The fake's costs: the echo takes 5 % of a CPU, each probe 1 %; each
// node's kube-proxy ticks once every 100 ms (10 % of a CPU, its idle)
// and spends fakeAgentWork more within 100 ms of each endpoint change.
const (
	fakeEchoPct, fakeProbePct = 5, 1
	fakeAgentWork             = 200 * time.Millisecond
)

type fakeChange struct {
	at   time.Time
	verb string // create, delete, patch
	what string // the resource
	addr string // an endpoint patch's address
}

func newFakeProbed(t *testing.T, fc *fakeCluster) *fakeProbed {
	t.Helper()
	fp := &fakeProbed{outage: 50 * time.Millisecond}
	note := func(verb, what string) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			c := fakeChange{at: time.Now(), verb: verb, what: what}
			if p, ok := a.(k8stesting.PatchAction); ok {
				c.addr = endpointOf(p.GetPatch())
			}
			if m, ok := a.(k8stesting.CreateAction); ok {
				if o, ok := m.GetObject().(metav1.Object); ok && o.GetLabels()[LabelRole] != roleDisruptObject {
					return false, nil, nil // the run's own set-up, not an event
				}
			}
			fp.mu.Lock()
			fp.changes = append(fp.changes, c)
			fp.mu.Unlock()
			return false, nil, nil
		}
	}
	fc.cs.PrependReactor("patch", "endpointslices", note("patch", "endpointslices"))
	fc.cs.PrependReactor("create", "services", note("create", "services"))
	fc.cs.PrependReactor("delete", "services", note("delete", "services"))
	fc.cs.PrependReactor("create", "networkpolicies", note("create", "networkpolicies"))
	fc.cs.PrependReactor("delete", "networkpolicies", note("delete", "networkpolicies"))
	// The disrupt pods' kubelet: the echo runs and is Ready (and the
	// endpoint controller lists it behind the run's Service), a probe pod
	// has run to its end when its log is read.
	fc.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		switch pod.Labels[LabelRole] {
		case roleDisruptEcho:
			fp.mu.Lock()
			fp.echoAt = time.Now()
			fp.mu.Unlock()
			pod.Spec.NodeName = pinnedNode(pod)
			pod.Status.Phase = corev1.PodRunning
			pod.Status.PodIP = "10.244.2.7"
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			_ = fc.cs.Tracker().Add(&discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Name: "echo-slice", Namespace: pod.Namespace,
					Labels: map[string]string{discoveryv1.LabelServiceName: pod.Name}},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.2.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
			})
			return true, pod, fc.cs.Tracker().Add(pod)
		case roleDisruptProbe:
			pod.Spec.NodeName = pinnedNode(pod)
			pod.Status.Phase = corev1.PodSucceeded
			return true, pod, fc.cs.Tracker().Add(pod)
		}
		return false, nil, nil
	})
	// The echo's kubelet runs an ephemeral blackhole container at once
	// and it has ended when it is looked at; each hold starts 2 ms after
	// its planned instant.
	fc.cs.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "ephemeralcontainers" {
			return false, nil, nil
		}
		pod := a.(k8stesting.UpdateAction).GetObject().(*corev1.Pod)
		c := pod.Spec.EphemeralContainers[len(pod.Spec.EphemeralContainers)-1]
		t0ns, _ := strconv.ParseInt(argValues(c.Args, "--t0")[0], 10, 64)
		hold, _ := time.ParseDuration(argValues(c.Args, "--hold")[0])
		fp.mu.Lock()
		fp.blackhole = c.DeepCopy()
		for _, at := range strings.Split(argValues(c.Args, "--at")[0], ",") {
			d, _ := time.ParseDuration(at)
			start := time.Unix(0, t0ns).Add(d + 2*time.Millisecond)
			fp.holes = append(fp.holes, disrupt.Span{Start: start, End: start.Add(hold)})
		}
		fp.mu.Unlock()
		pod.Status.EphemeralContainerStatuses = append(pod.Status.EphemeralContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}})
		return false, nil, nil
	})
	fc.logs = fp.log
	fc.meter = fp.meter
	return fp
}

// meter is an agent meter's log: one kube-proxy (pid 42), a sample every
// 20 ms from the echo's creation until now.
func (fp *fakeProbed) meter(*corev1.Pod) []byte {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	var b bytes.Buffer
	for at := fp.echoAt; at.Before(time.Now()); at = at.Add(20 * time.Millisecond) {
		ticks := int64(at.Sub(fp.echoAt) / (100 * time.Millisecond))
		for _, c := range fp.changes {
			if c.verb == "patch" && at.After(c.at) {
				ticks += int64(min(at.Sub(c.at), 100*time.Millisecond) * fakeAgentWork / (100 * time.Millisecond) / (time.Second / UserHZ))
			}
		}
		json.NewEncoder(&b).Encode(AgentSample{T: at.UnixNano(), Procs: []AgentProc{{PID: 42, Name: "kube-proxy", Ticks: ticks}}})
	}
	return b.Bytes()
}

// endpointOf reads the address of an endpoint merge patch.
func endpointOf(patch []byte) string {
	s := string(patch)
	i := strings.Index(s, `"addresses":["`)
	if i < 0 {
		return ""
	}
	s = s[i+len(`"addresses":["`):]
	return s[:strings.Index(s, `"`)]
}

// log is what a probe pod prints: its requests, computed from the changes
// noted, as EncodeRequests writes them.
func (fp *fakeProbed) log(pod *corev1.Pod, container string) ([]byte, error) {
	args := pod.Spec.Containers[0].Args
	var b bytes.Buffer
	if container == blackholeContainer {
		fp.mu.Lock()
		defer fp.mu.Unlock()
		for k, h := range fp.holes {
			disrupt.WriteSpan(&b, k, h)
		}
		return b.Bytes(), nil
	}
	if pod.Labels[LabelRole] == roleDisruptEcho {
		fp.mu.Lock()
		defer fp.mu.Unlock()
		for at := fp.echoAt; at.Before(time.Now().Add(disrupt.CPUEvery)); at = at.Add(disrupt.CPUEvery / 4) {
			disrupt.WriteCPU(&b, disrupt.CPUReading{At: at, CPU: at.Sub(fp.echoAt) * fakeEchoPct / 100})
		}
		return b.Bytes(), nil
	}

	spec, err := ParseDisruptProbes(argValues(args, "--probe")[0], time.Second)
	if err != nil {
		return nil, err
	}
	t0ns, _ := strconv.ParseInt(argValues(args, "--t0")[0], 10, 64)
	dur, _ := time.ParseDuration(argValues(args, "--duration")[0])
	t0 := time.Unix(0, t0ns)
	fp.mu.Lock()
	defer fp.mu.Unlock()
	interval := time.Duration(float64(time.Second) / spec[0].Rate)
	var reqs []disrupt.Request
	for at := time.Duration(0); at < dur; at += interval {
		r := disrupt.Request{Sent: at, Latency: 100 * time.Microsecond, Outcome: disrupt.OK}
		for _, c := range fp.changes {
			if d := t0.Add(at).Sub(c.at); fp.hurts != nil && fp.hurts(c) && d >= 0 && d < fp.outage {
				r = disrupt.Request{Sent: at, Outcome: disrupt.Timeout}
			}
		}
		for _, h := range fp.holes {
			if sent := t0.Add(at); !sent.Before(h.Start) && sent.Before(h.End) {
				r = disrupt.Request{Sent: at, Outcome: disrupt.Timeout}
			}
		}
		reqs = append(reqs, r)
	}
	b.WriteString("probe started\n")
	disrupt.WriteCPU(&b, disrupt.CPUReading{At: t0.Add(-time.Millisecond), CPU: 30 * time.Millisecond})
	disrupt.WriteCPU(&b, disrupt.CPUReading{At: t0.Add(dur + time.Millisecond), CPU: 30*time.Millisecond + (dur+2*time.Millisecond)*fakeProbePct/100})
	err = disrupt.EncodeRequests(&b, spec[0].Kind, reqs)
	return b.Bytes(), err
}

func disruptTestOptions(events ...string) DisruptOptions {
	return DisruptOptions{Namespace: "cnibench", Image: "cnibench:test", Target: DisruptTargetService, Services: 5,
		Probes: []disrupt.ProbeSpec{{Kind: disrupt.UDPRR, Rate: 1000, Timeout: 100 * time.Millisecond},
			{Kind: disrupt.TCPCRR, Rate: 200, Timeout: 100 * time.Millisecond}},
		Events: events, Repeats: 2, Settle: 150 * time.Millisecond, Spacing: 300 * time.Millisecond,
		Bucket: 10 * time.Millisecond, StartDelay: 100 * time.Millisecond, ReadyTimeout: time.Second,
		AgentSelector: DisruptAgents["kube-proxy"]}
}

func runDisrupt(t *testing.T, ctx context.Context, fc *fakeCluster, o DisruptOptions) (*disrupt.ArmResult, error) {
	t.Helper()
	cl, nodes, err := Fingerprint(ctx, fc.api)
	if err != nil {
		t.Fatal(err)
	}
	return fc.runner().Disrupt(ctx, cl, nodes, o)
}

// TestDisruptEventsOnTheProbesClock: each API change is marked at the
// instant the API server answered it, on the probes' timeline (their
// --t0); an outage the datapath put right after the endpoint change shows
// as that event's gap and loss and not its revert's, a Service created and
// deleted costs nothing; the changes are undone and the run leaves
// nothing behind.
func TestDisruptEventsOnTheProbesClock(t *testing.T) {
	fc := newFakeCluster(t, "a", "b")
	fp := newFakeProbed(t, fc)
	fp.hurts = func(c fakeChange) bool { return c.verb == "patch" && c.addr == ChangedAddress }
	arm, err := runDisrupt(t, context.Background(), fc, disruptTestOptions(EndpointChange, ServiceChurn))
	if err != nil {
		t.Fatal(err)
	}
	fc.wantClean(t)
	if want := float64(fakeEchoPct + 2*fakeProbePct); arm.ProbeCPUPct == nil || math.Abs(*arm.ProbeCPUPct-want) > 0.2 {
		t.Errorf("probe CPU %v %% (%s), want %.0f %%: the echo's and the probes' over the probing", arm.ProbeCPUPct, arm.ProbeCPUReason, want)
	}
	if !arm.Restored || arm.Name != "unknown-iptables" && !strings.HasSuffix(arm.Name, "-iptables") {
		t.Errorf("arm %q restored %v, want an -iptables arm, restored", arm.Name, arm.Restored)
	}
	if arm.Target != "10.96.0.42:7420" {
		t.Errorf("target %s, want the Service's ClusterIP", arm.Target)
	}
	if len(arm.Timelines) != 2 {
		t.Fatalf("%d timelines, want one per probe", len(arm.Timelines))
	}
	var patches []fakeChange
	for _, c := range fp.changes {
		if c.verb == "patch" {
			patches = append(patches, c)
		}
	}
	if len(patches) != 4 || patches[0].addr != ChangedAddress || patches[1].addr != PlaceholderAddress || patches[3].addr != PlaceholderAddress {
		t.Fatalf("endpoint patches %+v: want change, back, change, back", patches)
	}
	for _, tl := range arm.Timelines {
		if len(tl.Events) != 8 {
			t.Fatalf("%s: %d events, want 2 rounds × 2 kinds × change and revert", tl.Probe, len(tl.Events))
		}
		interval := 1000 / tl.RatePerSec
		for i, e := range tl.Events {
			lost := e.Failed + e.Timeouts
			switch {
			case e.Kind == EndpointChange && e.Label == "":
				// The outage: 50 ms from the patch, within one request
				// interval of the mark (the API's answer came after).
				if math.Abs(e.LongestGapMs-50) > interval+1 || math.Abs(float64(lost)-50/interval) > 2 {
					t.Errorf("%s event %d (endpoint change): gap %.1f ms, lost %d; want 50 ms, %.0f", tl.Probe, i, e.LongestGapMs, lost, 50/interval)
				}
				if e.RecoverMs == nil || *e.RecoverMs < 49-interval || *e.RecoverMs > 51+interval {
					t.Errorf("%s event %d: recover %v, want about 50 ms after its start", tl.Probe, i, e.RecoverMs)
				}
			default:
				if lost != 0 || e.LongestGapMs != 0 {
					t.Errorf("%s event %d (%s %s): lost %d, gap %.1f; want nothing", tl.Probe, i, e.Kind, e.Label, lost, e.LongestGapMs)
				}
			}
			// Both nodes' kube-proxy: fakeAgentWork each for an
			// endpoint change or its revert, nothing above their idle
			// for a Service; within a tick per node and window edge.
			want := 0.0
			if e.Kind == EndpointChange {
				want = 2 * ms(fakeAgentWork)
			}
			if e.AgentCPUMs == nil || math.Abs(*e.AgentCPUMs-want) > 45 {
				t.Errorf("%s event %d (%s %s): agent CPU %v ms (%s), want %.0f", tl.Probe, i, e.Kind, e.Label, e.AgentCPUMs, e.AgentCPUReason, want)
			}
		}
		// Marks at their planned instants: settle + k × spacing.
		for k := 0; k < 4; k++ {
			if at := tl.Events[2*k].StartMs; at < float64(150+300*k) || at > float64(150+300*k+40) {
				t.Errorf("%s: event %d at %.1f ms, planned at %d ms", tl.Probe, k, at, 150+300*k)
			}
		}
	}
}

// TestDisruptInterruptedUndoes: Ctrl-C while the endpoint is moved puts
// it back before the run's objects are deleted.
func TestDisruptInterruptedUndoes(t *testing.T) {
	fc := newFakeCluster(t, "a", "b")
	fp := newFakeProbed(t, fc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fc.cs.PrependReactor("patch", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if endpointOf(a.(k8stesting.PatchAction).GetPatch()) == ChangedAddress {
			cancel()
		}
		return false, nil, nil
	})
	_, err := runDisrupt(t, ctx, fc, disruptTestOptions(EndpointChange))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the cancellation", err)
	}
	fc.wantClean(t)
	// The endpoint back before the cleanup deleted the fillers.
	var verbs []string
	for _, c := range fp.changes {
		verbs = append(verbs, c.verb+" "+c.addr)
	}
	if len(verbs) < 3 || verbs[0] != "patch "+ChangedAddress || verbs[1] != "patch "+PlaceholderAddress || verbs[2] != "delete " {
		t.Errorf("changes %v: want the endpoint moved, moved back, then the cleanup", verbs)
	}
}

// TestDisruptAgentRestart: the kube-proxy pod on the server's node is
// deleted and the event lasts until its replacement is Ready; with no
// such pod the run stops before creating anything, naming --restart-cmd.
func TestDisruptAgentRestart(t *testing.T) {
	fc := newFakeCluster(t, "a", "b")
	newFakeProbed(t, fc)
	agent := func(name, uid, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: types.UID(uid),
			Labels: map[string]string{"k8s-app": "kube-proxy"}}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.250.0.3",
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	o := disruptTestOptions(AgentRestart)
	o.Repeats, o.Spacing = 1, 600*time.Millisecond

	_, err := runDisrupt(t, context.Background(), fc, o)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--restart-cmd") {
		t.Fatalf("without an agent pod: %v, want ErrInvalid naming --restart-cmd", err)
	}
	if len(fc.createdPods()) != 0 {
		t.Errorf("created %d pods before refusing", len(fc.createdPods()))
	}

	for _, p := range []*corev1.Pod{agent("kube-proxy-a", "1", "a"), agent("kube-proxy-b", "2", "b")} {
		if err := fc.cs.Tracker().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	var deleted []string
	// Node b's kube-proxy: pid 42 until its pod is deleted, pid 43 from
	// its replacement on, at 50 % of a CPU from its start.
	var mu sync.Mutex
	var repAt time.Time
	fc.cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		if d.GetNamespace() != "kube-system" {
			return false, nil, nil
		}
		deleted = append(deleted, d.GetName())
		go func() { // the DaemonSet controller and kubelet: started 100 ms later, Ready 100 ms after that
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			repAt = time.Now()
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			_ = fc.cs.Tracker().Add(agent("kube-proxy-b2", "3", "b"))
		}()
		return false, nil, nil
	})
	fc.meter = func(pod *corev1.Pod) []byte {
		mu.Lock()
		defer mu.Unlock()
		var b bytes.Buffer
		for at := time.Now().Add(-20 * time.Second); at.Before(time.Now()); at = at.Add(20 * time.Millisecond) {
			s := AgentSample{T: at.UnixNano(), Procs: []AgentProc{}}
			switch {
			case pinnedNode(pod) != "b" || repAt.IsZero():
				s.Procs = append(s.Procs, AgentProc{PID: 42, Name: "kube-proxy", Ticks: 1000})
			case at.After(repAt):
				s.Procs = append(s.Procs, AgentProc{PID: 43, Name: "kube-proxy", Ticks: int64(at.Sub(repAt) / (20 * time.Millisecond)), Start: repAt.UnixNano()})
			}
			json.NewEncoder(&b).Encode(s)
		}
		return b.Bytes()
	}
	arm, err := runDisrupt(t, context.Background(), fc, o)
	if err != nil {
		t.Fatal(err)
	}
	fc.wantClean(t)
	if len(deleted) != 1 || deleted[0] != "kube-proxy-b" {
		t.Errorf("deleted %v, want the server node's kube-proxy-b", deleted)
	}
	e := arm.Timelines[0].Events[0]
	if e.Kind != AgentRestart || e.ChangeDurationMs < 200 || e.ChangeDurationMs > 500 || !strings.Contains(e.Detail, "kube-proxy-b2 Ready") {
		t.Errorf("restart event %+v: want it to last from the delete until kube-proxy-b2 was Ready (200 ms on)", e)
	}
	// The new process's CPU from its start (100 ms after the delete) to
	// the restart's end, at 50 %; the old one's is not counted.
	if want := (e.ChangeDurationMs - 100) / 2; e.AgentCPUMs == nil || math.Abs(*e.AgentCPUMs-want) > 15 || !strings.Contains(e.Detail, "pid 43 on b") {
		t.Errorf("restart's agent CPU %v ms (%s; %s), want about %.0f from pid 43", e.AgentCPUMs, e.AgentCPUReason, e.Detail, want)
	}
}

// TestDisruptCommandOptions: bad flags are one ErrInvalid each, before
// any cluster is contacted.
func TestDisruptCommandOptions(t *testing.T) {
	good := DisruptCommand{Probes: "udp-rr,tcp-crr=100", Timeout: 500 * time.Millisecond, Target: "service", Services: 10,
		Events: "endpoint-change,service-churn", Repeats: 5, Settle: 3 * time.Second, Spacing: 4 * time.Second, Agent: "kube-proxy"}
	o, err := good.Options()
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Probes) != 2 || o.Probes[0].Rate != disrupt.DefaultUDPRate || o.Probes[1].Rate != 100 || o.Bucket != 100*time.Millisecond {
		t.Errorf("options %+v: want udp-rr at its default rate, tcp-crr at 100/s, 100 ms buckets", o)
	}
	for name, mod := range map[string]func(c *DisruptCommand){
		"unknown probe":          func(c *DisruptCommand) { c.Probes = "icmp" },
		"rate not a number":      func(c *DisruptCommand) { c.Probes = "udp-rr=fast" },
		"probe twice":            func(c *DisruptCommand) { c.Probes = "udp-rr,udp-rr" },
		"unknown event":          func(c *DisruptCommand) { c.Events = "reboot" },
		"endpoint without fill":  func(c *DisruptCommand) { c.Services = 0 },
		"target":                 func(c *DisruptCommand) { c.Target = "node" },
		"spacing under timeout":  func(c *DisruptCommand) { c.Spacing = 800 * time.Millisecond },
		"too many":               func(c *DisruptCommand) { c.Repeats = 1000 },
		"unknown agent":          func(c *DisruptCommand) { c.Events, c.Agent = "agent-restart", "calico" },
		"restart-cmd, no event":  func(c *DisruptCommand) { c.RestartCmd = "true" },
		"services over the max":  func(c *DisruptCommand) { c.Services = MaxServices + 1 },
		"settle shorter than 1s": func(c *DisruptCommand) { c.Settle = 0 },
		"blackhole of half the spacing": func(c *DisruptCommand) {
			c.Events, c.BlackholeFor = "blackhole", 2*time.Second
		},
		"blackhole of nothing": func(c *DisruptCommand) { c.Events, c.BlackholeFor = "blackhole", 0 },
	} {
		c := good
		mod(&c)
		if _, err := c.Options(); !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line matching ErrInvalid", name, err)
		}
	}
	c := good
	c.Events, c.Agent, c.RestartCmd = "agent-restart", "", "kill x"
	if _, err := c.Options(); err != nil {
		t.Errorf("agent-restart by command needs no --agent: %v", err)
	}
	c = good
	c.Events, c.BlackholeFor = "blackhole", 200*time.Millisecond
	if o, err := c.Options(); err != nil || o.BlackholeFor != 200*time.Millisecond {
		t.Errorf("blackhole of 200ms: %+v, %v", o.BlackholeFor, err)
	}
}

// A results database that cannot be opened stops the run before the
// cluster is contacted (the kubeconfig here does not exist: reaching it
// would be a different error).
func TestDisruptCommandDBFirst(t *testing.T) {
	c := DisruptCommand{Probes: "udp-rr", Timeout: 500 * time.Millisecond, Target: "service", Services: 10,
		Events: "endpoint-change", Repeats: 1, Settle: 3 * time.Second, Spacing: 4 * time.Second, Agent: "kube-proxy",
		Cluster: ClusterFlags{Kubeconfig: t.TempDir() + "/no-kubeconfig", Image: "cnibench:test", PullPolicy: "Never"},
		DBPath:  "/dev/null/results.db"}
	err := c.Run(context.Background(), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "results database") {
		t.Errorf("err %v: want the results database named", err)
	}
}

// TestDisruptBlackhole: an ephemeral container in the echo pod (root with
// CAP_NET_ADMIN only) drops the probes' port at each planned instant; the
// events are marked at its own spans, not the runner's waits, and a known
// hold is found as that event's gap, with no agent CPU and why.
func TestDisruptBlackhole(t *testing.T) {
	fc := newFakeCluster(t, "a", "b")
	fp := newFakeProbed(t, fc)
	o := disruptTestOptions(Blackhole)
	o.BlackholeFor = 100 * time.Millisecond
	arm, err := runDisrupt(t, context.Background(), fc, o)
	if err != nil {
		t.Fatal(err)
	}
	fc.wantClean(t)
	c := fp.blackhole
	if c == nil {
		t.Fatal("no blackhole container")
	}
	sc := c.SecurityContext
	if *sc.RunAsUser != 0 || len(sc.Capabilities.Add) != 1 || sc.Capabilities.Add[0] != "NET_ADMIN" || len(sc.Capabilities.Drop) != 1 ||
		*sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || c.Image != "cnibench:test" {
		t.Errorf("blackhole container %s, security %+v", c.Image, sc)
	}
	if len(fp.holes) != 2 {
		t.Fatalf("%d holds, want one per repeat", len(fp.holes))
	}
	for _, tl := range arm.Timelines {
		if len(tl.Events) != 2 {
			t.Fatalf("%s: %d events, want 2", tl.Probe, len(tl.Events))
		}
		interval := 1000 / tl.RatePerSec
		for i, e := range tl.Events {
			// Marked at the pod's span (2 ms after the plan), 100 ms long.
			if want := 150 + 300*float64(i) + 2; math.Abs(e.StartMs-want) > 0.5 || math.Abs(e.ChangeDurationMs-100) > 0.5 {
				t.Errorf("%s event %d at %.1f ms for %.1f ms, want %.0f for 100 (the pod's span)", tl.Probe, i, e.StartMs, e.ChangeDurationMs, want)
			}
			if math.Abs(e.LongestGapMs-100) > interval+1 {
				t.Errorf("%s event %d: gap %.1f ms, want 100", tl.Probe, i, e.LongestGapMs)
			}
			if e.AgentCPUMs != nil || !strings.Contains(e.AgentCPUReason, "no agent") {
				t.Errorf("%s event %d: agent CPU %v (%s), want none and why", tl.Probe, i, e.AgentCPUMs, e.AgentCPUReason)
			}
		}
	}
}
