package k8s

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// cleanUp ends Execute on every path out: unless o.Keep, it deletes the
// run's objects (and its namespace when the run created it) and returns
// err with any cleanup failure added.
func (r *Runner) cleanUp(ctx context.Context, o Options, id string, createdNS bool, err error) error {
	if o.Keep {
		fmt.Fprintf(o.Log, "keeping the run's objects (--keep); remove them with: cnibench k8s clean\n")
		return err
	}
	// Cleanup must run even when ctx is already cancelled by Ctrl-C;
	// thousands of filler Services take their time.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute+time.Duration(o.Services)*20*time.Millisecond)
	defer cancel()
	if cerr := r.deleteRun(cctx, o.Namespace, id, createdNS); cerr != nil {
		cerr = fmt.Errorf("cleanup incomplete (run `cnibench k8s clean`): %w", cerr)
		if err == nil {
			return cerr
		}
		return fmt.Errorf("%w; %v", err, cerr)
	}
	return err
}

// deleteRun removes the run's objects; "not found" counts as removed, so it
// is safe to call twice.
func (r *Runner) deleteRun(ctx context.Context, ns, id string, deleteNS bool) error {
	err := deleteLabeled(ctx, r.bulk(), ns, RunSelector(id))
	if err == nil {
		// Pods linger while their containers stop; wait, so that the
		// command returns with the cluster as it found it.
		err = r.waitPodsGone(ctx, ns, RunSelector(id))
	}
	if deleteNS {
		if derr := r.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
			err = errors.Join(err, APIError("delete", "namespace "+ns, derr))
		}
	}
	return err
}

// deleteLabeled deletes the pods, services, secrets, daemonsets,
// endpointslices and networkpolicies in ns (all namespaces when ns is "")
// that match selector.
func deleteLabeled(ctx context.Context, cs kubernetes.Interface, ns, selector string) error {
	lo := metav1.ListOptions{LabelSelector: selector}
	bg := metav1.DeletePropagationBackground
	do := metav1.DeleteOptions{PropagationPolicy: &bg}
	var errs []error
	gone := func(what string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, APIError("delete", what, err))
		}
	}
	if ds, err := cs.AppsV1().DaemonSets(ns).List(ctx, lo); err != nil {
		gone("daemonsets", err)
	} else {
		for _, d := range ds.Items {
			gone("daemonset "+d.Namespace+"/"+d.Name, cs.AppsV1().DaemonSets(d.Namespace).Delete(ctx, d.Name, do))
		}
	}
	if secs, err := cs.CoreV1().Secrets(ns).List(ctx, lo); err != nil {
		gone("secrets", err)
	} else {
		for _, s := range secs.Items {
			gone("secret "+s.Namespace+"/"+s.Name, cs.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, do))
		}
	}
	if svcs, err := cs.CoreV1().Services(ns).List(ctx, lo); err != nil {
		gone("services", err)
	} else {
		// Many at once: a run with --services has thousands.
		byNS := map[string][]string{}
		for _, s := range svcs.Items {
			byNS[s.Namespace] = append(byNS[s.Namespace], s.Name)
		}
		for n, names := range byNS {
			api := cs.CoreV1().Services(n)
			gone("services in "+n, deleteAll(ctx, names, lo,
				func(ctx context.Context) error { return deleteServiceCollection(ctx, cs, n, lo) },
				func(ctx context.Context) ([]string, error) { return objectNames(api.List(ctx, lo)) },
				func(ctx context.Context, name string) error { return api.Delete(ctx, name, do) }))
		}
	}
	gone("endpointslices", deleteSlices(ctx, cs, ns, selector))
	// `k8s latency`'s policies. A user whose role may not list them
	// (a manifest from before `k8s latency`) cannot have created any.
	if pols, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, lo); err != nil {
		if !apierrors.IsForbidden(err) {
			gone("networkpolicies", err)
		}
	} else {
		for _, p := range pols.Items {
			gone("networkpolicy "+p.Namespace+"/"+p.Name, cs.NetworkingV1().NetworkPolicies(p.Namespace).Delete(ctx, p.Name, do))
		}
	}
	if pods, err := cs.CoreV1().Pods(ns).List(ctx, lo); err != nil {
		gone("pods", err)
	} else {
		for _, p := range pods.Items {
			gone("pod "+p.Namespace+"/"+p.Name, cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, do))
		}
	}
	return errors.Join(errs...)
}

// Clean deletes every object and namespace any cnibench run created, in
// every namespace, and waits up to wait for the namespaces to be gone (0 =
// do not wait). It returns what it deleted, as kind/namespace/name.
func Clean(ctx context.Context, cs kubernetes.Interface, wait, poll time.Duration) ([]string, error) {
	lo := metav1.ListOptions{LabelSelector: ManagedSelector}
	var removed []string
	nss, err := cs.CoreV1().Namespaces().List(ctx, lo)
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, APIError("list", "namespaces", err)
	}
	// Objects first, by listing: a namespace we may not list or delete can
	// still hold cnibench objects we may delete.
	objs := listObjects(ctx, cs, lo, labeledKinds)
	if err := deleteLabeled(ctx, cs, "", ManagedSelector); err != nil {
		return nil, err
	}
	removed = append(removed, objs...)
	var pending []string
	if nss != nil {
		for _, n := range nss.Items {
			if err := cs.CoreV1().Namespaces().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return removed, APIError("delete", "namespace "+n.Name, err)
			}
			removed = append(removed, "namespace/"+n.Name)
			pending = append(pending, n.Name)
		}
	}
	if wait <= 0 || len(pending) == 0 {
		return removed, nil
	}
	if err := waitNamespacesGone(ctx, cs, pending, wait, poll); err != nil {
		return removed, err
	}
	return removed, nil
}
