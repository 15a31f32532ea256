package k8s

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Scenario names.
const (
	ScenarioSameNode  = "pod-same-node"
	ScenarioCrossNode = "pod-cross-node"
	ScenarioHost      = "host-network"
	ScenarioService   = "service"
)

// Scenarios lists every scenario in report order.
var Scenarios = []string{ScenarioSameNode, ScenarioCrossNode, ScenarioHost, ScenarioService}

var scenarioHelp = map[string]string{
	ScenarioSameNode:  "pod to pod on one node",
	ScenarioCrossNode: "pod to pod across two nodes",
	ScenarioHost:      "hostNetwork pods on two nodes: the node-to-node baseline (HOST Network row)",
	ScenarioService:   "pod to a ClusterIP Service in front of the server pod",
}

// ParseScenarios splits a comma list and checks every name; "" or "all"
// means every scenario.
func ParseScenarios(s string) ([]string, error) {
	if s == "" || s == "all" {
		return append([]string(nil), Scenarios...), nil
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if _, ok := scenarioHelp[n]; !ok {
			return nil, fmt.Errorf("unknown scenario %q; choose from %s", n, strings.Join(Scenarios, ", "))
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

// Placement says where one scenario's pods go, or why it is skipped.
type Placement struct {
	Scenario    string `json:"scenario"`
	ClientNode  string `json:"client_node,omitempty"`
	ServerNode  string `json:"server_node,omitempty"`
	HostNetwork bool   `json:"host_network,omitempty"`
	ViaService  bool   `json:"via_service,omitempty"`
	// Skip is the reason the scenario cannot run here; "" means it runs.
	Skip string `json:"skip,omitempty"`
}

// Description is the one line a report shows for the scenario's arm.
func (p Placement) Description() string {
	if p.Skip != "" {
		return scenarioHelp[p.Scenario] + " (skipped: " + p.Skip + ")"
	}
	return fmt.Sprintf("%s; client on %s, server on %s", scenarioHelp[p.Scenario], p.ClientNode, p.ServerNode)
}

// NodeState is a node as node selection sees it.
type NodeState struct {
	Name string
	// Unusable says why pods cannot be placed there; "" means schedulable.
	Unusable string
}

// NodeStates classifies nodes, sorted by name: a node is usable when it is
// Ready, not cordoned, and has no NoSchedule/NoExecute taint (the engine
// pods tolerate none, so the control plane of kubeadm clusters is left out).
func NodeStates(nodes []corev1.Node) []NodeState { return NodeStatesFor(nodes, nil, false) }

// NodeStatesFor is NodeStates for a run that chooses its nodes by label
// (sel; nil = every node) and may tolerate taints (tolerate: the engine
// pods then carry a toleration for every taint, so tainted nodes count as
// usable; cordoned and not-Ready ones still do not).
func NodeStatesFor(nodes []corev1.Node, sel labels.Selector, tolerate bool) []NodeState {
	out := make([]NodeState, 0, len(nodes))
	for _, n := range nodes {
		st := NodeState{Name: n.Name}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		switch {
		case !ready:
			st.Unusable = "not Ready"
		case n.Spec.Unschedulable:
			st.Unusable = "cordoned"
		case sel != nil && !sel.Matches(labels.Set(n.Labels)):
			st.Unusable = "not matching --node-selector " + sel.String()
		case !tolerate:
			for _, t := range n.Spec.Taints {
				if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
					st.Unusable = "tainted " + t.Key + ":" + string(t.Effect)
					break
				}
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func describeNodes(states []NodeState) string {
	var parts []string
	for _, s := range states {
		if s.Unusable == "" {
			parts = append(parts, s.Name)
		} else {
			parts = append(parts, s.Name+" ("+s.Unusable+")")
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// FlagError is a user's node choice that the cluster cannot honour.
type FlagError struct{ Msg string }

func (e *FlagError) Error() string { return e.Msg }

// PlanScenarios places each scenario on nodes. clientNode and serverNode
// are the user's choice ("" = pick): the client goes to clientNode or the
// first usable node, the server of a two-node scenario to serverNode or the
// first other usable node. A named node that does not exist or cannot take
// pods is an error; a two-node scenario on a one-node cluster is skipped
// with the reason.
func PlanScenarios(scenarios []string, nodes []NodeState, clientNode, serverNode string) ([]Placement, error) {
	var usable []string
	byName := map[string]NodeState{}
	for _, n := range nodes {
		byName[n.Name] = n
		if n.Unusable == "" {
			usable = append(usable, n.Name)
		}
	}
	if len(usable) == 0 {
		return nil, fmt.Errorf("no node can take the benchmark pods (nodes: %s)", describeNodes(nodes))
	}
	for flag, n := range map[string]string{"--client-node": clientNode, "--server-node": serverNode} {
		if n == "" {
			continue
		}
		st, ok := byName[n]
		if !ok {
			return nil, &FlagError{fmt.Sprintf("%s %s: no such node (nodes: %s)", flag, n, describeNodes(nodes))}
		}
		if st.Unusable != "" {
			return nil, &FlagError{fmt.Sprintf("%s %s: node is %s (nodes: %s)", flag, n, st.Unusable, describeNodes(nodes))}
		}
	}
	a := clientNode
	if a == "" {
		a = usable[0]
		// With only --server-node given, keep the client off that node so
		// the cross-node scenarios still cross.
		if serverNode != "" && a == serverNode && len(usable) > 1 {
			a = usable[1]
		}
	}
	b := serverNode
	if b == "" {
		for _, n := range usable {
			if n != a {
				b = n
				break
			}
		}
	}
	same := a
	if clientNode == "" && serverNode != "" {
		same = serverNode
	}

	var twoNodeSkip string
	switch {
	case len(usable) < 2:
		twoNodeSkip = fmt.Sprintf("needs two schedulable nodes, the cluster has one (%s)", usable[0])
	case a == b:
		twoNodeSkip = fmt.Sprintf("--client-node and --server-node are both %s", a)
	}

	out := make([]Placement, 0, len(scenarios))
	for _, s := range scenarios {
		p := Placement{Scenario: s}
		switch s {
		case ScenarioSameNode:
			p.ClientNode, p.ServerNode = same, same
		case ScenarioCrossNode, ScenarioHost:
			p.HostNetwork = s == ScenarioHost
			if twoNodeSkip != "" {
				p.Skip = twoNodeSkip
			} else {
				p.ClientNode, p.ServerNode = a, b
			}
		case ScenarioService:
			// Across nodes when there are two, so that service minus
			// pod-cross-node is the Service's own cost.
			p.ViaService = true
			p.ClientNode, p.ServerNode = a, b
			if b == "" {
				p.ServerNode = a
			}
		default:
			return nil, fmt.Errorf("unknown scenario %q; choose from %s", s, strings.Join(Scenarios, ", "))
		}
		out = append(out, p)
	}
	return out, nil
}

// Interleave returns the order of measurements: every repeat visits every
// runnable scenario, and each repeat starts one scenario later than the one
// before, so slow drift on the machine (another job, thermal state) spreads
// over all scenarios instead of landing on whichever ran last.
func Interleave(placements []Placement, repeats int) []Step {
	var run []Placement
	for _, p := range placements {
		if p.Skip == "" {
			run = append(run, p)
		}
	}
	var steps []Step
	for r := 0; r < repeats; r++ {
		for i := range run {
			steps = append(steps, Step{Placement: run[(i+r)%len(run)], Repeat: r + 1})
		}
	}
	return steps
}

// Step is one client pod: a scenario and its repeat number (1-based).
type Step struct {
	Placement
	Repeat int
	// Engine is the reference tool the pod measures with; "" is builtin.
	Engine string `json:"engine,omitempty"`
	// Arm is the stored arm (ArmName); "" means the scenario.
	Arm string `json:"arm,omitempty"`
}

func (s Step) armName() string {
	if s.Arm != "" {
		return s.Arm
	}
	return s.Scenario
}
