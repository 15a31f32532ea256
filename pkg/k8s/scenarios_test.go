package k8s

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestPlanNewScenarios(t *testing.T) {
	two := []NodeState{{"w1", ""}, {"w2", ""}}
	ps, err := PlanScenarios(AllScenarios, two, "", "")
	if err != nil {
		t.Fatal(err)
	}
	m := placementMap(ps)
	p2h, h2p, hp := m[ScenarioPodToHost], m[ScenarioHostToPod], m[ScenarioHairpin]
	if p2h.ClientNode != "w1" || p2h.ServerNode != "w2" || !p2h.ServerHost || p2h.ClientHost || p2h.HostNetwork {
		t.Errorf("pod-to-host %+v", p2h)
	}
	if h2p.ClientNode != "w1" || h2p.ServerNode != "w2" || !h2p.ClientHost || h2p.ServerHost || h2p.HostNetwork {
		t.Errorf("host-to-pod %+v", h2p)
	}
	if hp.ClientNode != "w1" || hp.ServerNode != "w1" || !hp.Hairpin || !hp.ViaService || hp.Skip != "" {
		t.Errorf("hairpin %+v", hp)
	}
	// pod-to-host shares the host-network server (one port on the node's
	// address), host-to-pod the pod-cross-node one; the others keep theirs.
	if m[ScenarioPodToHost].serverKey() != m[ScenarioHost].serverKey() ||
		m[ScenarioHostToPod].serverKey() != m[ScenarioCrossNode].serverKey() ||
		m[ScenarioService].serverKey() == m[ScenarioCrossNode].serverKey() || hp.serverKey() != "" {
		t.Errorf("server keys: %q %q %q %q", p2h.serverKey(), m[ScenarioHost].serverKey(), h2p.serverKey(), m[ScenarioCrossNode].serverKey())
	}

	// One node: the two cross-node paths are skipped with the reason,
	// hairpin needs only one.
	ps, err = PlanScenarios(AllScenarios, []NodeState{{"solo", ""}}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	m = placementMap(ps)
	for _, sc := range []string{ScenarioPodToHost, ScenarioHostToPod} {
		if !strings.Contains(m[sc].Skip, "needs two schedulable nodes") {
			t.Errorf("%s on one node: %+v", sc, m[sc])
		}
	}
	if m[ScenarioHairpin].Skip != "" || m[ScenarioHairpin].ClientNode != "solo" {
		t.Errorf("hairpin on one node: %+v", m[ScenarioHairpin])
	}
}

func TestHairpinSkip(t *testing.T) {
	for v, want := range map[string]string{"v1.31.4": "", "v1.29.0": "", "v1.28.15": "1.29+", "v1.27.3-eks-1": "1.29+", "v1.30.1+k3s1": "", "weird": ""} {
		got := HairpinSkip(v)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: %q", v, got)
		}
	}
}

// createdBy indexes the created pods by name.
func createdBy(fc *fakeCluster) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, p := range fc.createdPods() {
		out[p.Name] = p
	}
	return out
}

func TestExecuteNewScenarios(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	var svcs []*corev1.Service
	var deleted []string
	fc.cs.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		svcs = append(svcs, a.(k8stesting.CreateAction).GetObject().(*corev1.Service).DeepCopy())
		return false, nil, nil
	})
	fc.cs.PrependReactor("delete", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		deleted = append(deleted, a.(k8stesting.DeleteAction).GetName())
		return false, nil, nil
	})
	o := testOptions()
	o.Scenarios = AllScenarios
	ctx := context.Background()
	r, plan := fc.prepare(t, o)
	targets := map[string][]string{}
	if err := r.Execute(ctx, plan, o, func(s Sample) error {
		if s.Error != "" {
			t.Errorf("%s: %s", s.Pod, s.Error)
		}
		targets[s.Scenario] = append(targets[s.Scenario], s.Target)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pods := createdBy(fc)
	// pod-to-host: a pod client, aimed at n2's address, where the one
	// hostNetwork server of the run listens (shared with host-network).
	if got := targets[ScenarioPodToHost]; len(got) != 2 || got[0] != fc.nodes["n2"] {
		t.Errorf("pod-to-host targets %v, want n2's address %s", got, fc.nodes["n2"])
	}
	if _, ok := pods[ServerName("t3st", ScenarioPodToHost)]; ok {
		t.Error("pod-to-host started its own hostNetwork server beside host-network's: the port would clash")
	}
	if c := pods[ClientName("t3st", ScenarioPodToHost, 1)]; c == nil || c.Spec.HostNetwork || pinnedNode(c) != "n1" {
		t.Errorf("pod-to-host client %+v", c)
	}
	// host-to-pod: a hostNetwork client on n1 aimed at a pod IP on n2.
	if got := targets[ScenarioHostToPod]; len(got) != 2 || !strings.HasPrefix(got[0], "10.244.") || got[0] != targets[ScenarioCrossNode][0] {
		t.Errorf("host-to-pod targets %v (pod-cross-node %v)", got, targets[ScenarioCrossNode])
	}
	if c := pods[ClientName("t3st", ScenarioHostToPod, 2)]; c == nil || !c.Spec.HostNetwork || pinnedNode(c) != "n1" {
		t.Errorf("host-to-pod client %+v", c)
	}
	// hairpin: per repeat a Service selecting only that repeat's pod, the
	// pod carrying its own server, aimed at the Service.
	hp := pods[ClientName("t3st", ScenarioHairpin, 1)]
	if hp == nil {
		t.Fatal("no hairpin pod")
	}
	if _, ok := pods[ServerName("t3st", ScenarioHairpin)]; ok {
		t.Error("hairpin started a separate server pod")
	}
	if got := targets[ScenarioHairpin]; len(got) != 2 || got[0] != "10.96.0.42" {
		t.Errorf("hairpin targets %v, want the ClusterIP", got)
	}
	ic := hp.Spec.InitContainers
	if len(ic) != 2 || ic[0].Name != hairpinServer || ic[0].RestartPolicy == nil || *ic[0].RestartPolicy != corev1.ContainerRestartPolicyAlways ||
		ic[0].StartupProbe == nil || ic[0].Args[0] != "server" || ic[1].Name != hairpinWait ||
		!slices.Equal(ic[1].Args[:3], []string{"k8s", "wait-tcp", "10.96.0.42:" + strconv.Itoa(DefaultPort)}) {
		t.Errorf("hairpin init containers %+v", ic)
	}
	if hp.Spec.Containers[0].Name != containerName || argAfter(hp.Spec.Containers[0].Args, "--server") != "10.96.0.42" || hp.Spec.HostNetwork {
		t.Errorf("hairpin client %+v", hp.Spec.Containers[0])
	}
	for _, c := range append(hp.Spec.InitContainers, hp.Spec.Containers...) {
		if sc := c.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != nonRootUID || len(sc.Capabilities.Drop) != 1 {
			t.Errorf("hairpin container %s runs with privileges: %+v", c.Name, sc)
		}
	}
	var hsvc []*corev1.Service
	for _, s := range svcs {
		if s.Labels[LabelScenario] == ScenarioHairpin {
			hsvc = append(hsvc, s)
		}
	}
	if len(hsvc) != 2 {
		t.Fatalf("%d hairpin services, want one per repeat", len(hsvc))
	}
	if sel := hsvc[0].Spec.Selector; sel[LabelHairpin] != hp.Name || sel[LabelRun] != "t3st" || !hsvc[0].Spec.PublishNotReadyAddresses {
		t.Errorf("hairpin service %+v", hsvc[0].Spec)
	}
	if hp.Labels[LabelHairpin] != hp.Name {
		t.Errorf("hairpin pod labels %v", hp.Labels)
	}
	for _, s := range hsvc {
		if !slices.Contains(deleted, s.Name) {
			t.Errorf("hairpin service %s not deleted after its repeat (deleted: %v)", s.Name, deleted)
		}
	}
	fc.wantClean(t)
}

func TestPrepareSkipsHairpinOnOldCluster(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	fc.api.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.28.9"}
	o := testOptions()
	o.Scenarios = []string{ScenarioHairpin, ScenarioSameNode}
	_, plan := fc.prepare(t, o)
	if p := placementMap(plan.Placements)[ScenarioHairpin]; !strings.Contains(p.Skip, "native sidecar") || !strings.Contains(p.Skip, "v1.28.9") {
		t.Errorf("hairpin on 1.28: %+v", p)
	}
	o.Scenarios = []string{ScenarioHairpin}
	if _, err := fc.runner().Prepare(context.Background(), o); err == nil || !strings.Contains(err.Error(), "hairpin: needs native sidecar") {
		t.Errorf("only hairpin on 1.28: %v", err)
	}
}

func TestHairpinServiceCreateFailsIsASample(t *testing.T) {
	fc := newFakeCluster(t, "n1")
	fc.cs.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "x", errors.New("denied"))
	})
	o := testOptions()
	o.Scenarios = []string{ScenarioHairpin}
	o.Repeats = 1
	r, plan := fc.prepare(t, o)
	var got []Sample
	err := r.Execute(context.Background(), plan, o, func(s Sample) error { got = append(got, s); return nil })
	if err == nil || len(got) != 1 || !strings.Contains(got[0].Error, "hairpin service") {
		t.Fatalf("err %v samples %+v", err, got)
	}
	if _, err := fc.cs.CoreV1().Pods(plan.Namespace).Get(context.Background(), ClientName("t3st", ScenarioHairpin, 1), metav1.GetOptions{}); err == nil {
		t.Error("hairpin pod created without its Service")
	}
}

func TestPrepareChoosesNodePairByLabel(t *testing.T) {
	fc := newFakeCluster(t, "a1", "b1", "b2", "c1")
	ctx := context.Background()
	for n, zone := range map[string]string{"a1": "a", "b1": "b", "b2": "b", "c1": "c"} {
		node, _ := fc.cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		node.Labels = map[string]string{"zone": zone}
		if _, err := fc.cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	o := testOptions()
	o.Scenarios = []string{ScenarioSameNode, ScenarioCrossNode}
	o.ClientSelector, o.ServerSelector = "zone=b", "zone in (b,c)"
	_, plan := fc.prepare(t, o)
	m := placementMap(plan.Placements)
	// The server avoids the client's node when another node matches.
	if p := m[ScenarioCrossNode]; p.ClientNode != "b1" || p.ServerNode != "b2" {
		t.Errorf("cross-node %+v", p)
	}
	if p := m[ScenarioSameNode]; p.ClientNode != "b1" || p.ServerNode != "b1" {
		t.Errorf("same-node %+v", p)
	}
	for _, tc := range []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.ClientSelector = "zone=z" }, "--client-node-selector zone=z: matches no usable node (nodes: a1, b1, b2, c1)"},
		{func(o *Options) { o.ServerSelector = "zone==" }, "--server-node-selector"},
		{func(o *Options) { o.ClientNode = "a1" }, "--client-node and --client-node-selector: give one of them"},
		// The pool's own selector still applies.
		{func(o *Options) { o.NodeSelector = "zone!=b" }, "b1 (not matching --node-selector zone!=b)"},
	} {
		o := testOptions()
		o.ClientSelector, o.ServerSelector = "zone=b", "zone=c"
		tc.mod(&o)
		_, err := fc.runner().Prepare(ctx, o)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want a flag error with %q, got %v", tc.want, err)
		}
	}
}

// With several engines, hairpin runs with the built-in engine only (its
// sidecar server is cnibench's), whatever the order of --engine.
func TestHairpinWithToolEngines(t *testing.T) {
	hp := Placement{Scenario: ScenarioHairpin, Hairpin: true, ViaService: true, ClientNode: "a", ServerNode: "a"}
	engines := []EngineRun{{Name: "iperf3", Tests: []string{"tcp_bw"}}, {Name: EngineBuiltin, Tests: []string{"tcp_bw"}}}
	pl, skips, steps := planEngines([]Placement{hp}, engines, 1)
	if pl[0].Skip != "" || len(steps) != 1 || steps[0].Engine != "" || !strings.Contains(skips["hairpin/iperf3"], "sidecar") {
		t.Errorf("placement %+v skips %v steps %+v", pl[0], skips, steps)
	}
	_, _, steps = planEngines([]Placement{hp}, engines[:1], 1)
	if len(steps) != 0 {
		t.Errorf("hairpin with iperf3 alone: %+v", steps)
	}
}
