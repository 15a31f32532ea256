package k8s

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (r *Runner) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return 500 * time.Millisecond
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
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(r.poll())
	defer t.Stop()
	for {
		pod, err := r.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			return nil, APIError("get", "pod "+name, err)
		case cond(pod):
			return pod, nil
		case hopeless(pod):
			return nil, errors.New(r.explain(ctx, pod))
		case time.Now().After(deadline):
			return nil, fmt.Errorf("not ready after %s: %s", timeout, r.explain(ctx, pod))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
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
	deadline := time.Now().Add(timeout)
	for {
		svc, err := r.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", APIError("get", "service "+name, err)
		}
		sl, err := r.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return "", APIError("list", "endpointslices of "+name, err)
		}
		if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone && sliceHasReady(sl.Items, podIP) {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(min(2*time.Second, 4*r.poll())):
			}
			return ip, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("service %s: no ready endpoint for %s after %s (is an endpoint controller running?)", name, podIP, timeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(r.poll()):
		}
	}
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
func (r *Runner) ensureNamespace(ctx context.Context, ns, id string, timeout time.Duration) (bool, error) {
	api := r.Client.CoreV1().Namespaces()
	deadline := time.Now().Add(timeout)
	for {
		cur, err := api.Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err := api.Create(ctx, NamespaceSpec(ns, id), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return false, APIError("create", "namespace "+ns, err)
			}
			return true, nil
		case apierrors.IsForbidden(err):
			// Allowed into the namespace but not to read namespaces:
			// use it as it is; creating pods will tell if it is missing.
			return false, nil
		case err != nil:
			return false, APIError("get", "namespace "+ns, err)
		case cur.Status.Phase != corev1.NamespaceTerminating:
			return false, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("namespace %s is still terminating after %s; wait, or pass --namespace", ns, timeout)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(r.poll()):
		}
	}
}
