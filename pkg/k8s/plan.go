package k8s

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/runid"
)

// Scenario names.
const (
	ScenarioSameNode  = "pod-same-node"
	ScenarioCrossNode = "pod-cross-node"
	ScenarioHost      = "host-network"
	ScenarioService   = "service"
	// The paths other tools measure (cilium perf's pod-to-host and
	// host-to-pod, kubernetes/perf-tests' hairpin).
	ScenarioPodToHost = "pod-to-host"
	ScenarioHostToPod = "host-to-pod"
	ScenarioHairpin   = "hairpin"
)

// Scenarios lists the default scenarios in report order: the rows of the
// source documents' tables.
var Scenarios = []string{ScenarioSameNode, ScenarioCrossNode, ScenarioHost, ScenarioService}

// AllScenarios is every scenario ("--scenarios all"), in report order.
var AllScenarios = []string{ScenarioSameNode, ScenarioCrossNode, ScenarioHost, ScenarioService,
	ScenarioPodToHost, ScenarioHostToPod, ScenarioHairpin}

var scenarioHelp = map[string]string{
	ScenarioSameNode:  "pod to pod on one node",
	ScenarioCrossNode: "pod to pod across two nodes",
	ScenarioHost:      "hostNetwork pods on two nodes: the node-to-node baseline (HOST Network row)",
	ScenarioService:   "pod to a ClusterIP Service in front of the server pod",
	ScenarioPodToHost: "pod to a hostNetwork pod on another node",
	ScenarioHostToPod: "hostNetwork pod to a pod on another node",
	ScenarioHairpin:   "a pod to a ClusterIP Service whose only endpoint is that pod itself",
}

// MinHairpinMinor is the Kubernetes 1.x minor from which the hairpin pod's
// server can be a native sidecar (an init container that keeps running;
// on by default since 1.29).
const MinHairpinMinor = 29

// ParseScenarios splits a comma list and checks every name; "" or
// "default" means the default scenarios (Scenarios), "all" every one.
func ParseScenarios(s string) ([]string, error) {
	switch s {
	case "", "default":
		return append([]string(nil), Scenarios...), nil
	case "all":
		return append([]string(nil), AllScenarios...), nil
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if _, ok := scenarioHelp[n]; !ok {
			return nil, fmt.Errorf("unknown scenario %q; choose from %s (or default, all)", n, strings.Join(AllScenarios, ", "))
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
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
			return nil, errkind.Errorf(ErrInvalid, "--node-selector %q: %v", o.NodeSelector, err)
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
			return nil, errkind.Errorf(ErrInvalid, "%s and %s: give one of them", role.byName, role.flag)
		}
		rs, err := labels.Parse(role.expr)
		if err != nil {
			return nil, errkind.Errorf(ErrInvalid, "%s %q: %v", role.flag, role.expr, err)
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
			return nil, errkind.Errorf(ErrInvalid, "--services %d: needs the %s scenario, which this run does not measure", o.Services, ScenarioService)
		}
		if err := CheckServices(ctx, r.Client, o.Namespace, o.Services); err != nil {
			return nil, err
		}
	}
	return &Plan{RunID: r.RunID, Namespace: o.Namespace, Cluster: cl, Placements: pl, Engines: engines,
		EngineSkips: engineSkips, Steps: steps, nodes: nodes}, nil
}

// Placement says where one scenario's pods go, or why it is skipped.
type Placement struct {
	Scenario   string `json:"scenario"`
	ClientNode string `json:"client_node,omitempty"`
	ServerNode string `json:"server_node,omitempty"`
	// HostNetwork puts both pods on their node's network; ClientHost and
	// ServerHost only the one side (pod-to-host, host-to-pod).
	HostNetwork bool `json:"host_network,omitempty"`
	ClientHost  bool `json:"client_host_network,omitempty"`
	ServerHost  bool `json:"server_host_network,omitempty"`
	ViaService  bool `json:"via_service,omitempty"`
	// Hairpin: the client and the server are one pod (the server a sidecar)
	// and the client aims at a Service whose only endpoint is that pod.
	Hairpin bool `json:"hairpin,omitempty"`
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
			return nil, errkind.Errorf(ErrInvalid, "%s %s: no such node (nodes: %s)", flag, n, describeNodes(nodes))
		}
		if st.Unusable != "" {
			return nil, errkind.Errorf(ErrInvalid, "%s %s: node is %s (nodes: %s)", flag, n, st.Unusable, describeNodes(nodes))
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
		case ScenarioPodToHost, ScenarioHostToPod:
			// Across nodes, like host-network, so that the three compare
			// on one node pair.
			p.ServerHost = s == ScenarioPodToHost
			p.ClientHost = s == ScenarioHostToPod
			if twoNodeSkip != "" {
				p.Skip = twoNodeSkip
			} else {
				p.ClientNode, p.ServerNode = a, b
			}
		case ScenarioHairpin:
			p.ViaService, p.Hairpin = true, true
			p.ClientNode, p.ServerNode = a, a
		case ScenarioService:
			// Across nodes when there are two, so that service minus
			// pod-cross-node is the Service's own cost.
			p.ViaService = true
			p.ClientNode, p.ServerNode = a, b
			if b == "" {
				p.ServerNode = a
			}
		default:
			return nil, fmt.Errorf("unknown scenario %q; choose from %s", s, strings.Join(AllScenarios, ", "))
		}
		out = append(out, p)
	}
	return out, nil
}

// PickNode chooses a node by label selector for one role: the first usable
// node by name whose labels match sel, preferring one other than avoid
// (the client's node, when choosing the server's). flag names the option
// in the error when nothing matches.
func PickNode(flag string, sel labels.Selector, nodes []corev1.Node, states []NodeState, avoid string) (string, error) {
	lbl := map[string]labels.Set{}
	for _, n := range nodes {
		lbl[n.Name] = labels.Set(n.Labels)
	}
	var match []string
	for _, st := range states {
		if st.Unusable == "" && sel.Matches(lbl[st.Name]) {
			match = append(match, st.Name)
		}
	}
	if len(match) == 0 {
		return "", errkind.Errorf(ErrInvalid, "%s %s: matches no usable node (nodes: %s)", flag, sel.String(), describeNodes(states))
	}
	for _, m := range match {
		if m != avoid {
			return m, nil
		}
	}
	return match[0], nil
}

// clientHostNetwork and serverHostNetwork say whether each side's pod is
// on its node's network.
func (p Placement) clientHostNetwork() bool { return p.HostNetwork || p.ClientHost }
func (p Placement) serverHostNetwork() bool { return p.HostNetwork || p.ServerHost }

// serverKey names the server pod a placement measures against. Scenarios
// with the same key share one server pod: two hostNetwork servers on one
// node would both need the engine's port on the node's address, so
// host-network and pod-to-host must share theirs (and pod-cross-node and
// host-to-pod may). The service scenario keeps its own server (the
// Service selects it); hairpin has none (its client pod carries it).
func (p Placement) serverKey() string {
	switch {
	case p.Hairpin:
		return ""
	case p.ViaService:
		return "service"
	case p.serverHostNetwork():
		return "host@" + p.ServerNode
	}
	return "pod@" + p.ServerNode
}

// HairpinSkip says why the hairpin scenario cannot run on a cluster of
// this version ("" = it can): its server is a native sidecar container.
func HairpinSkip(version string) string {
	v := strings.TrimPrefix(version, "v")
	major, rest, _ := strings.Cut(v, ".")
	minorS, _, _ := strings.Cut(rest, ".")
	minor, err := strconv.Atoi(strings.TrimRight(minorS, "+"))
	if major != "1" || err != nil {
		return ""
	}
	if minor < MinHairpinMinor {
		return fmt.Sprintf("needs native sidecar containers (Kubernetes 1.%d+), the cluster runs %s", MinHairpinMinor, version)
	}
	return ""
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
