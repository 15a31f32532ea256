package k8s

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
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
//
// Its two halves: setUp (setup.go) readies the cluster side, measureSteps
// (measure.go) runs the client pods; cleanUp (cleanup.go) runs on every
// path out.
func (r *Runner) Execute(ctx context.Context, plan *Plan, o Options, onSample func(Sample) error) (err error) {
	o.defaults()
	po := o.podOptions(plan.RunID)
	createdNS := false
	fmt.Fprintf(o.Log, "run %s in namespace %s on %s\n", plan.RunID, o.Namespace, plan.Cluster.Summary())
	defer func() { err = r.cleanUp(ctx, o, plan.RunID, createdNS, err) }()
	createdNS, err = r.ensureNamespace(ctx, o.Namespace, plan.RunID, o.ReadyTimeout)
	if err != nil {
		return err
	}
	set, err := r.setUp(ctx, plan, o, po)
	if err != nil {
		return err
	}
	return r.measureSteps(ctx, plan, o, po, set, onSample)
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
