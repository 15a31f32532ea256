package k8s

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Every wait on the cluster — for a pod, a Service, a namespace to be
// usable or gone, the audit's pods — polls through pollUntil, which is
// apimachinery's wait.PollUntilContextTimeout; each wait keeps its own
// timeout and turns errPollTimeout into a message naming what it waited
// for.

func (r *Runner) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return 500 * time.Millisecond
}

// errPollTimeout is pollUntil's answer when its timeout passed first.
var errPollTimeout = errors.New("poll timed out")

// pollUntil calls cond at once, then every interval, until cond is done or
// fails (its error is returned as it is), ctx ends (ctx.Err()) or timeout
// passes (errPollTimeout); timeout <= 0 leaves ctx alone to end it. cond
// gets no context: it calls the API with the caller's ctx rather than the
// poll's deadline, so a call still in flight when the time runs out
// completes and the timeout's message can say what was seen last.
func pollUntil(ctx context.Context, interval, timeout time.Duration, cond func() (bool, error)) error {
	var condErr error
	check := func(context.Context) (bool, error) {
		done, err := cond()
		condErr = err
		return done, err
	}
	var err error
	if timeout > 0 {
		err = wait.PollUntilContextTimeout(ctx, interval, timeout, true, check)
	} else {
		err = wait.PollUntilContextCancel(ctx, interval, true, check)
	}
	switch {
	case err == nil:
		return nil
	case condErr != nil:
		return condErr
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return errPollTimeout
}

// podCond decides whether a pod has reached the wanted state.
type podCond func(*corev1.Pod) bool

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podStarted(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning || podFinished(p)
}

func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// waitPod polls the pod until cond holds. It gives up early when the pod
// can no longer get there (image missing, crash loop, failed — unless a
// failed pod is what cond accepts), and on timeout; either way the error is
// one line built from the pod's status and events.
func (r *Runner) waitPod(ctx context.Context, ns, name string, timeout time.Duration, cond podCond) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := pollUntil(ctx, r.poll(), timeout, func() (bool, error) {
		p, err := r.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil && ctx.Err() != nil:
			return false, ctx.Err()
		case err != nil:
			return false, APIError("get", "pod "+name, err)
		}
		pod = p
		switch {
		case cond(p):
			return true, nil
		case hopeless(p):
			return false, errors.New(r.explain(ctx, p))
		}
		return false, nil
	})
	switch {
	case errors.Is(err, errPollTimeout):
		return nil, fmt.Errorf("not ready after %s: %s", timeout, r.explain(ctx, pod))
	case err != nil:
		return nil, err
	}
	return pod, nil
}

// explain fetches the pod's events and summarises; events are a best
// effort (RBAC may hide them), the pod status alone often suffices.
func (r *Runner) explain(ctx context.Context, pod *corev1.Pod) string {
	ev, err := r.Client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod.Name,
	})
	var items []corev1.Event
	if err == nil {
		items = ev.Items
	}
	msg := Explain(pod, items)
	// A crashing container usually says why on its last line.
	if c, previous := crashed(pod); c != "" {
		if b, err := r.logsOpt(ctx, pod.Namespace, pod.Name, &corev1.PodLogOptions{Container: c, Previous: previous}); err == nil && len(bytes.TrimSpace(b)) > 0 {
			msg = oneLine(msg + "; log: " + lastLine(b))
		}
	}
	return msg
}

// crashed names a container that exited non-zero, and whether that was a
// previous instance (restarted since).
func crashed(p *corev1.Pod) (container string, previous bool) {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return cs.Name, false
			}
			if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
				return cs.Name, true
			}
		}
	}
	return "", false
}

// waitService waits until the Service has a ClusterIP and its
// EndpointSlice lists the server pod as ready, then gives kube-proxy (or
// the CNI's load balancer) a moment to program the node: there is no API
// that says a node's rules are in place.
func (r *Runner) waitService(ctx context.Context, ns, name, podIP string, timeout time.Duration) (string, error) {
	var ip string
	err := pollUntil(ctx, r.poll(), timeout, func() (bool, error) {
		svc, err := r.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, APIError("get", "service "+name, err)
		}
		sl, err := r.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return false, APIError("list", "endpointslices of "+name, err)
		}
		ip = svc.Spec.ClusterIP
		return ip != "" && ip != corev1.ClusterIPNone && sliceHasReady(sl.Items, podIP), nil
	})
	switch {
	case errors.Is(err, errPollTimeout):
		return "", fmt.Errorf("service %s: no ready endpoint for %s after %s (is an endpoint controller running?)", name, podIP, timeout)
	case err != nil:
		return "", err
	}
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(min(2*time.Second, 4*r.poll())):
	}
	return ip, nil
}

func sliceHasReady(slices []discoveryv1.EndpointSlice, ip string) bool {
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if a == ip {
					return true
				}
			}
		}
	}
	return false
}

// ensureNamespace creates the namespace unless it exists. It waits out a
// namespace still terminating from an earlier run, since nothing can be
// created in it. It reports whether this run created it (and so deletes it).
func (r *Runner) ensureNamespace(ctx context.Context, ns, id string, timeout time.Duration) (created bool, err error) {
	api := r.Client.CoreV1().Namespaces()
	err = pollUntil(ctx, r.poll(), timeout, func() (bool, error) {
		for {
			cur, err := api.Get(ctx, ns, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				_, err := api.Create(ctx, NamespaceSpec(ns, id), metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					continue // created since the Get: look at it at once
				}
				if err != nil {
					return false, APIError("create", "namespace "+ns, err)
				}
				created = true
				return true, nil
			case apierrors.IsForbidden(err):
				// Allowed into the namespace but not to read namespaces:
				// use it as it is; creating pods will tell if it is missing.
				return true, nil
			case err != nil:
				return false, APIError("get", "namespace "+ns, err)
			}
			return cur.Status.Phase != corev1.NamespaceTerminating, nil
		}
	})
	if errors.Is(err, errPollTimeout) {
		return false, fmt.Errorf("namespace %s is still terminating after %s; wait, or pass --namespace", ns, timeout)
	}
	return created, err
}

// waitPodsGone polls until no pod matches selector in ns, or ctx ends.
func (r *Runner) waitPodsGone(ctx context.Context, ns, selector string) error {
	var left []corev1.Pod
	var listErr error
	err := pollUntil(ctx, r.poll(), 0, func() (bool, error) {
		pods, err := r.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			listErr = APIError("list", "pods", err)
			return false, listErr
		}
		left = pods.Items
		return len(left) == 0, nil
	})
	if err != nil && listErr == nil { // ctx, the cleanup's deadline, ended it
		return fmt.Errorf("%d pod(s) still terminating, e.g. %s", len(left), left[0].Name)
	}
	return err
}

// waitNamespacesGone polls until none of the namespaces exists, or timeout.
func waitNamespacesGone(ctx context.Context, cs kubernetes.Interface, pending []string, timeout, interval time.Duration) error {
	err := pollUntil(ctx, interval, timeout, func() (bool, error) {
		var still []string
		for _, n := range pending {
			if _, err := cs.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{}); err == nil {
				still = append(still, n)
			} else if !apierrors.IsNotFound(err) {
				return false, APIError("get", "namespace "+n, err)
			}
		}
		pending = still
		return len(pending) == 0, nil
	})
	if errors.Is(err, errPollTimeout) {
		return fmt.Errorf("namespaces still terminating after %s: %s", timeout, strings.Join(pending, ", "))
	}
	return err
}

// waitAudits polls until every pod the audit DaemonSet ds should run has
// finished its audit, or timeout; either way it returns the pods as last
// listed, so the caller reports what finished and why the rest did not.
func (r *Runner) waitAudits(ctx context.Context, ns, ds string, timeout time.Duration) ([]corev1.Pod, error) {
	sel := RunSelector(r.RunID)
	var pods []corev1.Pod
	err := pollUntil(ctx, r.poll(), timeout, func() (bool, error) {
		cur, err := r.Client.AppsV1().DaemonSets(ns).Get(ctx, ds, metav1.GetOptions{})
		if err != nil {
			return false, APIError("get", "daemonset "+ds, err)
		}
		pl, err := r.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, APIError("list", "audit pods", err)
		}
		pods = pl.Items
		desired := int(cur.Status.DesiredNumberScheduled)
		settled := 0
		for i := range pods {
			if auditSettled(&pods[i]) {
				settled++
			}
		}
		return desired > 0 && len(pods) >= desired && settled == len(pods), nil
	})
	if errors.Is(err, errPollTimeout) {
		return pods, nil
	}
	return pods, err
}
