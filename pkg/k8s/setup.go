package k8s

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The first half of Execute: everything on the cluster side a run needs
// before its first client pod (measure.go is the second half).

// runSetup is what setUp leaves for the measuring half.
type runSetup struct {
	// targets is the address each step measures against, by targetKey.
	targets map[string]string
	// meters are the agent meters (--agent-cpu); nil without them.
	meters *agentMeters
}

// setUp prepares a run in its namespace (already there): the token, the
// node probes (completing plan.Cluster, then o.OnProbed), the filler
// Services, the agent meters, one server per server key and the measured
// Service, and the settle wait. Whatever it creates carries the run's
// labels, so Execute's cleanup finds it also when setUp fails half way.
func (r *Runner) setUp(ctx context.Context, plan *Plan, o Options, po PodOptions) (*runSetup, error) {
	// A per-run token: the servers answer only this run's clients, which
	// matters most for the host-network server, reachable from the node's
	// whole network.
	if _, err := r.Client.CoreV1().Secrets(po.Namespace).Create(ctx, TokenSecret(po, newToken()), metav1.CreateOptions{}); err != nil {
		return nil, APIError("create", "token secret", err)
	}
	runnable, nodes := runnableNodes(plan, o)
	plan.Cluster.ApplyProbes(r.probeNodes(ctx, po, nodes, o.ReadyTimeout, o.InspectDatapath), plan.nodes)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted while probing the nodes: %w", err)
	}
	fmt.Fprintf(o.Log, "probed %s: %s\n", strings.Join(nodes, ", "), plan.Cluster.Summary())
	if o.OnProbed != nil {
		if err := o.OnProbed(plan.Cluster); err != nil {
			return nil, err
		}
	}
	if o.Services > 0 {
		t0 := time.Now()
		err := createFillers(ctx, r.bulk(), po, o.Services, func(done int) {
			fmt.Fprintf(o.Log, "filler services: %d of %d created\n", done, o.Services)
		})
		if err != nil {
			return nil, fmt.Errorf("creating %d filler services: %w", o.Services, err)
		}
		d := time.Since(t0)
		fmt.Fprintf(o.Log, "filler services: %d Services + EndpointSlices created in %.1fs (%s)\n", o.Services, d.Seconds(), fillerRate(o.Services, d))
	}
	set := &runSetup{}
	if o.AgentCPU {
		life := int64(len(plan.Steps))*int64((o.MeasureTimeout+o.ReadyTimeout).Seconds()) + 2*int64(o.ReadyTimeout.Seconds())
		set.meters = r.startMeters(ctx, po, nodes, plan.Cluster.Probes, o.ReadyTimeout, life, o.Log)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("interrupted while starting the agent meters: %w", err)
		}
	}
	var err error
	if set.targets, err = r.startServers(ctx, plan, o, po, runnable); err != nil {
		return nil, err
	}
	if o.SettleIdle > 0 {
		if err := r.settle(ctx, po, o, clientNodes(runnable)); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// runnableNodes lists the placements that run (logging the skipped ones)
// and their nodes, each once, in order of first use.
func runnableNodes(plan *Plan, o Options) (runnable []Placement, nodes []string) {
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
	return runnable, nodes
}

// startServers creates the server pods (one per server key and engine;
// see serverKey) and the measured Service, waits until each is ready — a
// Service until its ClusterIP answers from the client's node — and returns
// every step's target by targetKey: a sharer's is its owner's.
func (r *Runner) startServers(ctx context.Context, plan *Plan, o Options, po PodOptions, runnable []Placement) (map[string]string, error) {
	cs, ns := r.Client, po.Namespace
	targets := map[string]string{}
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
				return nil, APIError("create", "server pod for "+p.Scenario, err)
			}
			if p.ViaService {
				// Created after the fillers, so that the node rules that
				// carry it were written with every filler in place too.
				if _, err := cs.CoreV1().Services(ns).Create(ctx, ServiceSpec(po.forEngine(e)), metav1.CreateOptions{}); err != nil {
					return nil, APIError("create", "service", err)
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
				return nil, fmt.Errorf("%s: server pod %s: %w", p.Scenario, name, err)
			}
			key := targetKey(p.Scenario, e)
			targets[key] = pod.Status.PodIP
			if p.ViaService {
				ip, err := r.waitService(ctx, ns, ServiceName(plan.RunID), pod.Status.PodIP, o.ReadyTimeout)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", p.Scenario, err)
				}
				targets[key] = ip
				// No API says a node's service rules are in place; with
				// thousands of Services writing them takes seconds to
				// minutes, so ask the client's node itself.
				if err := r.waitDataplane(ctx, po.forEngine(e), p, ip, o.MeasureTimeout); err != nil {
					return nil, fmt.Errorf("%s: %w", p.Scenario, err)
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
	return targets, nil
}

// newToken is 32 random bytes, hex: the run's engine token.
func newToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}
