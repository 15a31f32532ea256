package k8s

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestParseScenarios(t *testing.T) {
	got, err := ParseScenarios("service, pod-same-node,service")
	if err != nil || !slices.Equal(got, []string{ScenarioService, ScenarioSameNode}) {
		t.Errorf("got %v %v", got, err)
	}
	if got, _ := ParseScenarios("all"); !slices.Equal(got, AllScenarios) || len(got) != 7 {
		t.Errorf("all: %v", got)
	}
	for _, d := range []string{"", "default"} {
		if got, _ := ParseScenarios(d); !slices.Equal(got, Scenarios) || len(got) != 4 {
			t.Errorf("%q: %v", d, got)
		}
	}
	if _, err := ParseScenarios("pod-same-node,nodeport"); err == nil || !strings.Contains(err.Error(), `"nodeport"`) || !strings.Contains(err.Error(), "host-network") {
		t.Errorf("unknown scenario error should name it and the choices: %v", err)
	}
}

func TestNodeStates(t *testing.T) {
	cordoned := readyNode("c", "")
	cordoned.Spec.Unschedulable = true
	tainted := readyNode("a-cp", "")
	tainted.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	soft := readyNode("d", "")
	soft.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}
	notReady := readyNode("b", "")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	st := NodeStates([]corev1.Node{*soft, *cordoned, *tainted, *notReady})
	want := []NodeState{{"a-cp", "tainted node-role.kubernetes.io/control-plane:NoSchedule"}, {"b", "not Ready"}, {"c", "cordoned"}, {"d", ""}}
	if !slices.Equal(st, want) {
		t.Errorf("got %v\nwant %v", st, want)
	}
}

func placementMap(ps []Placement) map[string]Placement {
	m := map[string]Placement{}
	for _, p := range ps {
		m[p.Scenario] = p
	}
	return m
}

func TestPlanScenarios(t *testing.T) {
	three := []NodeState{{"cp", "tainted x:NoSchedule"}, {"w1", ""}, {"w2", ""}, {"w3", ""}}
	ps, err := PlanScenarios(Scenarios, three, "", "")
	if err != nil {
		t.Fatal(err)
	}
	m := placementMap(ps)
	if p := m[ScenarioSameNode]; p.ClientNode != "w1" || p.ServerNode != "w1" {
		t.Errorf("same-node %+v", p)
	}
	for _, sc := range []string{ScenarioCrossNode, ScenarioHost, ScenarioService} {
		if p := m[sc]; p.ClientNode != "w1" || p.ServerNode != "w2" || p.Skip != "" {
			t.Errorf("%s %+v", sc, p)
		}
	}
	if !m[ScenarioHost].HostNetwork || m[ScenarioCrossNode].HostNetwork || !m[ScenarioService].ViaService {
		t.Error("flags wrong")
	}

	ps, _ = PlanScenarios(Scenarios, three, "w3", "w1")
	m = placementMap(ps)
	if p := m[ScenarioCrossNode]; p.ClientNode != "w3" || p.ServerNode != "w1" {
		t.Errorf("chosen nodes ignored: %+v", p)
	}
	if p := m[ScenarioSameNode]; p.ClientNode != "w3" || p.ServerNode != "w3" {
		t.Errorf("same-node should follow --client-node: %+v", p)
	}
	// Only --server-node: the client moves off it, same-node goes there.
	ps, _ = PlanScenarios(Scenarios, three, "", "w1")
	m = placementMap(ps)
	if p := m[ScenarioCrossNode]; p.ClientNode != "w2" || p.ServerNode != "w1" {
		t.Errorf("--server-node only: %+v", p)
	}
	if p := m[ScenarioSameNode]; p.ServerNode != "w1" {
		t.Errorf("--server-node only, same-node: %+v", p)
	}

	ps, _ = PlanScenarios(Scenarios, three, "w2", "w2")
	if p := placementMap(ps)[ScenarioCrossNode]; !strings.Contains(p.Skip, "both w2") {
		t.Errorf("same node named twice: %+v", p)
	}

	for _, tc := range []struct{ client, server, want string }{
		{"nope", "", "--client-node nope: no such node"},
		{"", "cp", "--server-node cp: node is tainted"},
	} {
		_, err := PlanScenarios(Scenarios, three, tc.client, tc.server)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "w1") {
			t.Errorf("%+v: %v", tc, err)
		}
	}
	if _, err := PlanScenarios(Scenarios, []NodeState{{"n", "not Ready"}}, "", ""); err == nil || !strings.Contains(err.Error(), "n (not Ready)") {
		t.Errorf("no usable node: %v", err)
	}
}

func TestPlanOneNode(t *testing.T) {
	ps, err := PlanScenarios(Scenarios, []NodeState{{"cp", "tainted x:NoSchedule"}, {"solo", ""}}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	m := placementMap(ps)
	for _, sc := range []string{ScenarioCrossNode, ScenarioHost} {
		if !strings.Contains(m[sc].Skip, "needs two schedulable nodes") || !strings.Contains(m[sc].Skip, "solo") {
			t.Errorf("%s: skip %q", sc, m[sc].Skip)
		}
	}
	if p := m[ScenarioService]; p.Skip != "" || p.ClientNode != "solo" || p.ServerNode != "solo" {
		t.Errorf("service on one node: %+v", p)
	}
	if p := m[ScenarioSameNode]; p.Skip != "" {
		t.Errorf("same-node skipped: %+v", p)
	}
	if !strings.Contains(m[ScenarioCrossNode].Description(), "skipped") {
		t.Error("description of a skipped scenario does not say so")
	}
}

func TestInterleave(t *testing.T) {
	ps := []Placement{{Scenario: "a"}, {Scenario: "b", Skip: "x"}, {Scenario: "c"}, {Scenario: "d"}}
	var got []string
	for _, s := range Interleave(ps, 3) {
		got = append(got, s.Scenario+string(rune('0'+s.Repeat)))
	}
	want := []string{"a1", "c1", "d1", "c2", "d2", "a2", "d3", "a3", "c3"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v want %v", got, want)
	}
}

func TestNodeSelectorAndTolerations(t *testing.T) {
	mk := func(name string, lbl map[string]string, taint bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if taint {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "perf", Effect: corev1.TaintEffectNoSchedule}}
		}
		return n
	}
	nodes := []corev1.Node{mk("a", map[string]string{"pool": "perf"}, true), mk("b", map[string]string{"pool": "perf"}, false), mk("c", nil, false)}
	sel, _ := labels.Parse("pool=perf")
	usable := func(st []NodeState) (out []string) {
		for _, s := range st {
			if s.Unusable == "" {
				out = append(out, s.Name)
			}
		}
		return out
	}
	if got := usable(NodeStatesFor(nodes, sel, false)); !slices.Equal(got, []string{"b"}) {
		t.Errorf("selector without tolerations: %v, want [b]", got)
	}
	if got := usable(NodeStatesFor(nodes, sel, true)); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("selector with tolerations: %v, want [a b]", got)
	}
	st := NodeStatesFor(nodes, sel, false)
	if st[2].Unusable != "not matching --node-selector pool=perf" {
		t.Errorf("c: %q", st[2].Unusable)
	}
	// One node left by the selector: the two-node scenarios are skipped
	// with the reason, not failed.
	pl, err := PlanScenarios(Scenarios, st, "", "")
	if err != nil || pl[1].Skip == "" {
		t.Errorf("plan %+v %v", pl, err)
	}
}

func TestRunTolerationsAndBadSelector(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	o := testOptions()
	o.NodeSelector = "pool in (perf"
	if _, err := fc.runner().Prepare(context.Background(), o); err == nil || !strings.Contains(err.Error(), "--node-selector") {
		t.Fatalf("bad selector: %v", err)
	}
	pod := ServerPod(PodOptions{RunID: "x", TolerateTaints: true}, Placement{Scenario: ScenarioSameNode, ServerNode: "n1"})
	if len(pod.Spec.Tolerations) != 1 || pod.Spec.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("tolerations %+v", pod.Spec.Tolerations)
	}
	if pod := ServerPod(PodOptions{RunID: "x"}, Placement{Scenario: ScenarioSameNode, ServerNode: "n1"}); len(pod.Spec.Tolerations) != 0 {
		t.Errorf("tolerations without asking: %+v", pod.Spec.Tolerations)
	}
}
