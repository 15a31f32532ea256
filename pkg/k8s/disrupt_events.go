package k8s

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cnibench/cnibench/pkg/disrupt"
	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/runid"
)

// The events of `k8s disrupt`: changes made through the API server (or,
// for an agent that is no pod, by a command the user gives) while the
// probes run. Each is marked from the API server's answer to its first
// request (the kill, for a restart by command) to its last one; a change
// that stays is undone half a spacing later, and the undo is an event of
// its own, judged in its own window (as the lab's endpoint-change).

// The Kubernetes event kinds (--events).
const (
	// ServiceChurn creates one more Service with one ready endpoint (a
	// selectorless Service and its EndpointSlice, as a filler), then
	// deletes it: every node's kube-proxy (or the CNI's load balancer)
	// adds its rules, then removes them.
	ServiceChurn = "service-churn"
	// EndpointChange moves the endpoint of one filler Service among N to
	// another address (its EndpointSlice patched), then back: the partial
	// sync of one Service that is not the probed one.
	EndpointChange = "endpoint-change"
	// PolicyChurn creates a NetworkPolicy selecting the server pod that
	// allows the probes' port from anywhere, then deletes it: a correct
	// datapath drops nothing while it isolates the pod and lets the
	// probes in. Meaningful only where the CNI enforces policy.
	PolicyChurn = "policy-churn"
	// AgentRestart restarts the datapath agent of the server's node: its
	// pod deleted and its replacement awaited until Ready, or the user's
	// --restart-cmd run when the agent is no pod.
	AgentRestart = "agent-restart"
	// Blackhole drops the probes' port in the echo pod for a known time
	// (--blackhole, 200 ms by default): an ephemeral container there,
	// with CAP_NET_ADMIN, holds an owned nftables table
	// (disrupt.PortBlackhole) at each planned instant — the check of the
	// timeline's resolution on a cluster, as the lab's blackhole is in a
	// lab. The container stamps its spans on the node's clock.
	Blackhole = "blackhole"
)

// DisruptEvents lists the event kinds, for help and errors.
var DisruptEvents = []string{ServiceChurn, EndpointChange, PolicyChurn, AgentRestart, Blackhole}

// DisruptAgents maps each agent agent-restart knows by name to the label
// selector its pods carry in their upstream manifests.
var DisruptAgents = map[string]string{
	"kube-proxy": "k8s-app=kube-proxy",
	"flannel":    "app=flannel",
	"cilium":     "k8s-app=cilium",
}

// ChangedAddress is where endpoint-change moves a filler's endpoint:
// TEST-NET-1 as PlaceholderAddress, never routed.
const ChangedAddress = "192.0.2.2"

// firing is one change as the runner saw it.
type firing struct {
	start, end time.Time
	detail     string
}

// kubeEvent is one event kind bound to a run: fire makes firing n's
// change; undo, when not nil, undoes it.
type kubeEvent struct {
	kind string
	fire func(ctx context.Context, n int) (firing, error)
	undo func(ctx context.Context, n int) (firing, error)
	// noAgent, when set, is why no agent works for this event: its
	// agent CPU is not metered.
	noAgent string
}

// disruptEnv is what the events act on.
type disruptEnv struct {
	r          *Runner
	po         PodOptions
	server     string // the server's node
	serverPod  *corev1.Pod
	fillers    int
	svcIndex   int // the filler endpoint-change moves
	agentSel   string
	restartCmd string
	// blackholeFor is how long each blackhole holds.
	blackholeFor time.Duration
	cni          string
	poll         time.Duration
}

// apiAt runs one API request and says when its answer arrived.
func apiAt(call func() error) (time.Time, error) {
	err := call()
	return time.Now(), err
}

// newKubeEvent binds kind to env.
func newKubeEvent(kind string, env *disruptEnv) (*kubeEvent, error) {
	ns := env.po.Namespace
	switch kind {
	case ServiceChurn:
		svcs, eps := env.r.Client.CoreV1().Services(ns), env.r.Client.DiscoveryV1().EndpointSlices(ns)
		return &kubeEvent{kind: kind,
			fire: func(ctx context.Context, n int) (firing, error) {
				svc, sl := churnService(env.po, n)
				a, err := apiAt(func() error { _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); return err })
				if err != nil {
					return firing{}, APIError("create", "service "+svc.Name, err)
				}
				b, err := apiAt(func() error { _, err := eps.Create(ctx, sl, metav1.CreateOptions{}); return err })
				if err != nil {
					return firing{start: a}, APIError("create", "endpointslice "+sl.Name, err)
				}
				return firing{start: a, end: b, detail: "Service " + svc.Name + " and its EndpointSlice created"}, nil
			},
			undo: func(ctx context.Context, n int) (firing, error) {
				name := churnName(env.po.RunID, n)
				a, err := apiAt(func() error { return eps.Delete(ctx, name, metav1.DeleteOptions{}) })
				if err != nil && !apierrors.IsNotFound(err) {
					return firing{}, APIError("delete", "endpointslice "+name, err)
				}
				b, err := apiAt(func() error { return svcs.Delete(ctx, name, metav1.DeleteOptions{}) })
				if err != nil && !apierrors.IsNotFound(err) {
					return firing{start: a}, APIError("delete", "service "+name, err)
				}
				return firing{start: a, end: b, detail: "Service " + name + " and its EndpointSlice deleted"}, nil
			}}, nil
	case EndpointChange:
		name := FillerName(env.po.RunID, env.svcIndex)
		set := func(ctx context.Context, addr string) (firing, error) {
			t0 := time.Now()
			a, err := apiAt(func() error {
				_, err := env.r.Client.DiscoveryV1().EndpointSlices(ns).Patch(ctx, name, types.MergePatchType, endpointPatch(addr), metav1.PatchOptions{})
				return err
			})
			if err != nil {
				return firing{}, APIError("patch", "endpointslice "+name, err)
			}
			return firing{start: a, end: a, detail: fmt.Sprintf("filler %s's endpoint set to %s (API answer after %.1f ms)", name, addr, ms(a.Sub(t0)))}, nil
		}
		return &kubeEvent{kind: kind,
			fire: func(ctx context.Context, _ int) (firing, error) { return set(ctx, ChangedAddress) },
			undo: func(ctx context.Context, _ int) (firing, error) { return set(ctx, PlaceholderAddress) }}, nil
	case PolicyChurn:
		pols := env.r.Client.NetworkingV1().NetworkPolicies(ns)
		note := ""
		if ok, why := enforcesPolicy(env.cni); !ok {
			note = "; " + why + ": nothing to measure of the datapath here"
		}
		return &kubeEvent{kind: kind,
			fire: func(ctx context.Context, n int) (firing, error) {
				p := allowPolicy(env.po, n)
				a, err := apiAt(func() error { _, err := pols.Create(ctx, p, metav1.CreateOptions{}); return err })
				if err != nil {
					return firing{}, APIError("create", "networkpolicy "+p.Name, err)
				}
				return firing{start: a, end: a, detail: "NetworkPolicy " + p.Name + " (server pod, probes' port allowed from anywhere) created" + note}, nil
			},
			undo: func(ctx context.Context, n int) (firing, error) {
				name := policyName(env.po.RunID, n)
				a, err := apiAt(func() error { return pols.Delete(ctx, name, metav1.DeleteOptions{}) })
				if err != nil && !apierrors.IsNotFound(err) {
					return firing{}, APIError("delete", "networkpolicy "+name, err)
				}
				return firing{start: a, end: a, detail: "NetworkPolicy " + name + " deleted" + note}, nil
			}}, nil
	case Blackhole:
		// The blackhole container makes the change on its own
		// schedule; the runner waits as long, and its marks are
		// replaced by the container's spans once the probes are read
		// (Disrupt).
		return &kubeEvent{kind: kind, noAgent: "a blackhole is a rule of the kernel's; no agent does work during it",
			fire: func(ctx context.Context, _ int) (firing, error) {
				a := time.Now()
				if !disrupt.WaitUntil(ctx, a.Add(env.blackholeFor)) {
					return firing{start: a}, ctx.Err()
				}
				return firing{start: a, end: time.Now()}, nil
			}}, nil
	case AgentRestart:
		ev := &kubeEvent{kind: kind}
		if env.restartCmd != "" {
			ev.fire = func(ctx context.Context, _ int) (firing, error) { return env.restartByCommand(ctx) }
		} else {
			ev.fire = func(ctx context.Context, _ int) (firing, error) { return env.restartPod(ctx) }
		}
		return ev, nil
	}
	return nil, errkind.Errorf(ErrInvalid, "--events: %q is not an event; want one of %s", kind, strings.Join(DisruptEvents, ", "))
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// churnName names service-churn's n-th Service (and its slice).
func churnName(runID string, n int) string { return runid.Name(runID, fmt.Sprintf("churn-%d", n)) }

// policyName names policy-churn's n-th policy.
func policyName(runID string, n int) string { return runid.Name(runID, fmt.Sprintf("allow-%d", n)) }

// churnService is service-churn's n-th Service and slice: a filler under
// its own name and role, so the fillers' count stays N.
func churnService(po PodOptions, n int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	name := churnName(po.RunID, n)
	svc, sl := FillerService(po, 0), FillerSlice(po, 0)
	svc.Name, sl.Name = name, name
	svc.Labels = po.labels(scenarioDisrupt, roleDisruptObject)
	sl.Labels = po.labels(scenarioDisrupt, roleDisruptObject)
	sl.Labels[discoveryv1.LabelServiceName] = name
	sl.Labels[discoveryv1.LabelManagedBy] = EndpointSliceManagedBy
	return svc, sl
}

// endpointPatch is a JSON merge patch setting a filler slice's one
// endpoint to addr (a merge patch replaces the list whole).
func endpointPatch(addr string) []byte {
	return []byte(fmt.Sprintf(`{"endpoints":[{"addresses":[%q],"conditions":{"ready":true}}]}`, addr))
}

// allowPolicy is policy-churn's n-th policy: ingress to the server pod on
// the probes' port, TCP and UDP, from any source (a Service's traffic may
// arrive from a node address after SNAT, not only from the client pod).
func allowPolicy(po PodOptions, n int) *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(disrupt.ProbePort)
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName(po.RunID, n), Namespace: po.Namespace, Labels: po.labels(scenarioDisrupt, roleDisruptObject)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: po.labels(scenarioDisrupt, roleDisruptEcho)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
				{Protocol: &tcp, Port: &port}, {Protocol: &udp, Port: &port}}}},
		},
	}
}

// agentPod finds the agent's pod on the server's node (the field
// selector asks the API server; the node is checked again, as a fake or
// an old server may ignore it).
func (env *disruptEnv) agentPod(ctx context.Context) (*corev1.Pod, error) {
	pods, err := env.r.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: env.agentSel,
		FieldSelector: "spec.nodeName=" + env.server})
	if err != nil {
		return nil, APIError("list", "pods "+env.agentSel, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == env.server && p.DeletionTimestamp == nil && podReady(p) {
			return p, nil
		}
	}
	return nil, errkind.Errorf(ErrInvalid, "agent-restart: no Ready pod labelled %s on node %s (an agent run outside pods, as on k8slab, is restarted by --restart-cmd)",
		env.agentSel, env.server)
}

// restartPod deletes the agent's pod on the server's node and waits until
// a new one there is Ready: the event runs from the API server's answer to
// the delete until the replacement was seen Ready (to the poll interval).
func (env *disruptEnv) restartPod(ctx context.Context) (firing, error) {
	old, err := env.agentPod(ctx)
	if err != nil {
		return firing{}, err
	}
	a, err := apiAt(func() error {
		return env.r.Client.CoreV1().Pods(old.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{})
	})
	if err != nil {
		return firing{}, APIError("delete", "agent pod "+old.Namespace+"/"+old.Name, err)
	}
	var repl *corev1.Pod
	err = pollUntil(ctx, env.poll, 5*time.Minute, func() (bool, error) {
		p, err := env.agentPod(ctx)
		if err != nil || p.UID == old.UID {
			return false, nil
		}
		repl = p
		return true, nil
	})
	b := time.Now()
	if err != nil {
		return firing{start: a}, fmt.Errorf("agent-restart: no Ready replacement of %s/%s on %s: %w", old.Namespace, old.Name, env.server, err)
	}
	return firing{start: a, end: b, detail: fmt.Sprintf("pod %s/%s deleted; %s Ready %.0f ms later (seen every %s)",
		old.Namespace, old.Name, repl.Name, ms(b.Sub(a)), env.poll)}, nil
}

// restartByCommand runs the user's restart command with CNB_NODE set to
// the server's node: the event runs from its start to its exit, so the
// command should return once the agent serves again.
func (env *disruptEnv) restartByCommand(ctx context.Context) (firing, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", env.restartCmd)
	cmd.Env = append(os.Environ(), "CNB_NODE="+env.server)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	a := time.Now()
	err := cmd.Run()
	b := time.Now()
	if err != nil {
		return firing{start: a}, fmt.Errorf("agent-restart: --restart-cmd: %w: %s", err, lastLine(out.Bytes()))
	}
	return firing{start: a, end: b, detail: fmt.Sprintf("--restart-cmd on %s took %.0f ms", env.server, ms(b.Sub(a)))}, nil
}

// restored checks, through the API, that no change of the events is
// left: no churned Service, slice or policy, and the moved filler's
// endpoint back at PlaceholderAddress.
func (env *disruptEnv) restored(ctx context.Context, kinds []string) error {
	ns, sel := env.po.Namespace, RunSelector(env.po.RunID)+","+LabelRole+"="+roleDisruptObject
	var left []string
	if l, err := objectNames(env.r.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})); err != nil {
		return APIError("list", "services", err)
	} else {
		left = append(left, l...)
	}
	if l, err := objectNames(env.r.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})); err != nil {
		return APIError("list", "endpointslices", err)
	} else {
		left = append(left, l...)
	}
	if slices.Contains(kinds, PolicyChurn) {
		l, err := objectNames(env.r.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{LabelSelector: sel}))
		if err != nil {
			return APIError("list", "networkpolicies", err)
		}
		left = append(left, l...)
	}
	if len(left) > 0 {
		return fmt.Errorf("left by the events: %s", strings.Join(left, ", "))
	}
	if slices.Contains(kinds, EndpointChange) {
		name := FillerName(env.po.RunID, env.svcIndex)
		sl, err := env.r.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: RunSelector(env.po.RunID) + "," + discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return APIError("list", "endpointslices", err)
		}
		if len(sl.Items) != 1 || len(sl.Items[0].Endpoints) != 1 || !slices.Equal(sl.Items[0].Endpoints[0].Addresses, []string{PlaceholderAddress}) {
			return fmt.Errorf("filler %s's endpoint is not back at %s", name, PlaceholderAddress)
		}
	}
	return nil
}
