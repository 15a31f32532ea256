package k8s

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

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

func (r *Runner) logs(ctx context.Context, ns, pod, container string) ([]byte, error) {
	return r.logsOpt(ctx, ns, pod, &corev1.PodLogOptions{Container: container})
}

func (r *Runner) logsOpt(ctx context.Context, ns, pod string, o *corev1.PodLogOptions) ([]byte, error) {
	if r.Logs != nil {
		return r.Logs(ctx, ns, pod, o.Container)
	}
	return r.Client.CoreV1().Pods(ns).GetLogs(pod, o).DoRaw(ctx)
}

// newToken is 32 random bytes, hex: the run's engine token.
func newToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}
