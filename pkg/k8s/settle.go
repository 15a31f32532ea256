package k8s

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/sysinfo"
)

// A run that creates thousands of Services measures, by default, while the
// cluster is still digesting them: kube-proxy rewriting its rules, the API
// server and controllers handling every event. That is a different question
// ("what does the creation storm cost") from the one --services asks ("is
// the lookup slower with N entries"), and on a small node it dominates the
// answer. With --settle-idle, the run waits before its first measurement
// until each client node's CPUs were at least that idle over one window,
// read from the node's /proc/stat by a probe pod (`cnibench k8s
// wait-idle`): /proc/stat is not namespaced, so the pod sees the node.

// SettleWindow is the interval over which the node's idle share is read;
// SettleTimeout bounds the wait on one node.
const (
	SettleWindow  = 3 * time.Second
	SettleTimeout = 5 * time.Minute
)

// ErrNotIdle: the node did not reach the idle share before the timeout.
var ErrNotIdle = errors.New("the node did not settle")

// WaitIdle reads the CPU times (read: a /proc/stat snapshot, e.g.
// sysinfo.Host.ReadStat) every window and returns once one window was at
// least minIdle percent idle (idle+iowait over all CPUs): how long that
// took and the share of the last window.
func WaitIdle(ctx context.Context, read func() (*sysinfo.Stat, error), minIdle float64, window, timeout time.Duration) (time.Duration, float64, error) {
	t0 := time.Now()
	prev, err := read()
	if err != nil {
		return 0, 0, err
	}
	last := -1.0
	for {
		select {
		case <-ctx.Done():
			return 0, last, ctx.Err()
		case <-time.After(window):
		}
		cur, err := read()
		if err != nil {
			return 0, last, err
		}
		if s, ok := sysinfo.SplitOf(prev.Total, cur.Total); ok {
			last = s.Idle + s.Iowait
			if last >= minIdle {
				return time.Since(t0), last, nil
			}
		}
		prev = cur
		if time.Since(t0) >= timeout {
			if last < 0 { // no window had CPU ticks to divide
				return time.Since(t0), last, fmt.Errorf("%w: no CPU time elapsed in any %s window, want %.0f %% idle (waited %s)",
					ErrNotIdle, window, minIdle, timeout)
			}
			return time.Since(t0), last, fmt.Errorf("%w: %.0f %% idle over the last %s, want %.0f %% (waited %s)",
				ErrNotIdle, last, window, minIdle, timeout)
		}
	}
}

// settleProbeName names the settle probe pod on one client node.
func settleProbeName(runID, node string) string { return runid.Name(runID, "settle-"+node) }

// SettleProbePod waits, on node, until its CPUs are minIdle percent idle.
func SettleProbePod(o PodOptions, node string, minIdle float64, timeout time.Duration) *corev1.Pod {
	pod := o.basePod(settleProbeName(o.RunID, node), "settle", "probe", Placement{}, node)
	pod.Spec.Containers[0].Args = []string{"k8s", "wait-idle", "--min-idle", fmt.Sprintf("%g", minIdle),
		"--window", SettleWindow.String(), "--timeout", timeout.String()}
	pod.Spec.Containers[0].Env = nil
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.ActiveDeadlineSeconds = ptr(max(1, int64(timeout.Seconds())+30))
	return pod
}

// settle runs a settle probe on each client node, one after another, and
// logs what each found. A node that does not settle in time is a warning,
// not a failure: the run measures anyway and the log says so.
func (r *Runner) settle(ctx context.Context, po PodOptions, o Options, nodes []string) error {
	for _, node := range nodes {
		done, line, err := r.runProbe(ctx, SettleProbePod(po, node, o.SettleIdle, SettleTimeout), o.ReadyTimeout+SettleTimeout)
		switch {
		case err != nil:
			return fmt.Errorf("settling node %s: %w", node, err)
		case done.Status.Phase == corev1.PodSucceeded:
			fmt.Fprintf(o.Log, "settle: %s: %s\n", node, line)
		default:
			fmt.Fprintf(o.Log, "settle: %s: WARNING: measuring anyway: %s\n", node, oneLine(Explain(done, nil)+"; "+line))
		}
	}
	return nil
}

// clientNodes lists the client nodes of the placements, each once, in
// order of first use.
func clientNodes(ps []Placement) []string {
	var nodes []string
	for _, p := range ps {
		if p.ClientNode != "" && !slices.Contains(nodes, p.ClientNode) {
			nodes = append(nodes, p.ClientNode)
		}
	}
	return nodes
}
