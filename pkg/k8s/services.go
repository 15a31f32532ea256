package k8s

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/runid"
)

// Filler Services: `k8s run --services N` puts the measured Service behind
// N others, so that the datapath's service lookup (kube-proxy's iptables
// KUBE-SERVICES chain, its nftables verdict map, a CNI's eBPF map) holds N
// entries more while the client measures. Each filler is a real ClusterIP
// Service with one ready endpoint, as kube-proxy sees a real service; only
// the endpoint address is a placeholder nobody answers on.
const (
	// MaxServices bounds --services. A /16 service range (kubeadm's
	// default is /12) holds 65,534 addresses; beyond this many, creating
	// and syncing the rules takes minutes on any cluster, and the question
	// "does the lookup scale" is answered long before.
	MaxServices = 50000
	// PlaceholderAddress is the fillers' endpoint: TEST-NET-1 (RFC 5737),
	// reserved for documentation and never routed, so no packet a filler's
	// rule would send can reach a real host.
	PlaceholderAddress = "192.0.2.1"
	// fillerPort is the fillers' service and endpoint port.
	fillerPort = 80
	// fillerWorkers is how many creates or deletes are in flight at once:
	// enough to keep a small API server busy (it batches etcd writes), few
	// enough that its priority-and-fairness queues stay short.
	fillerWorkers = 24
	// EndpointSliceManagedBy marks the fillers' slices as cnibench's, so
	// the EndpointSlice controllers leave them alone.
	EndpointSliceManagedBy = "cnibench-filler"
	roleFiller             = "filler"
)

// FillerName names filler i (0-based): cnb-<run>-x<i>.
func FillerName(runID string, i int) string { return runid.Name(runID, "x"+strconv.Itoa(i)) }

// FillerService is filler i: a ClusterIP Service without a selector (its
// endpoints are ours, not the endpoint controller's), one TCP port.
func FillerService(o PodOptions, i int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: FillerName(o.RunID, i), Namespace: o.Namespace, Labels: o.labels("", roleFiller)},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: fillerPort, TargetPort: intstr.FromInt32(fillerPort)}},
		},
	}
}

// FillerSlice is filler i's EndpointSlice: one ready endpoint at
// PlaceholderAddress, so kube-proxy writes the full rule chain (service,
// endpoint, DNAT) a real service gets.
func FillerSlice(o PodOptions, i int) *discoveryv1.EndpointSlice {
	name := FillerName(o.RunID, i)
	labels := o.labels("", roleFiller)
	labels[discoveryv1.LabelServiceName] = name
	labels[discoveryv1.LabelManagedBy] = EndpointSliceManagedBy
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{PlaceholderAddress},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("tcp"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(fillerPort))}},
	}
}

// ErrServicesForbidden is wrapped when RBAC does not let the user create
// and delete the fillers.
var ErrServicesForbidden = errors.New("RBAC denied")

// CheckServices decides, creating nothing, whether n filler Services fit:
// cnibench's own bound, RBAC (a SelfSubjectAccessReview per verb and
// resource, as `kubectl auth can-i` asks), the namespace's ResourceQuotas,
// and the free addresses of the Service CIDR where the cluster publishes
// its ServiceCIDR objects (networking.k8s.io, beta in 1.31 and off by
// default; without it the range is not readable from the API and a full
// range shows up as a create error, after which the run cleans up). A
// count beyond a limit matches ErrInvalid; RBAC's refusal wraps
// ErrServicesForbidden.
func CheckServices(ctx context.Context, cs kubernetes.Interface, ns string, n int) error {
	if n < 0 || n > MaxServices {
		return errkind.Errorf(ErrInvalid, "--services %d: must be 0-%d", n, MaxServices)
	}
	if n == 0 {
		return nil
	}
	for _, ra := range []authv1.ResourceAttributes{
		{Namespace: ns, Verb: "create", Resource: "services"},
		{Namespace: ns, Verb: "delete", Resource: "services"},
		{Namespace: ns, Verb: "create", Group: discoveryv1.GroupName, Resource: "endpointslices"},
		{Namespace: ns, Verb: "delete", Group: discoveryv1.GroupName, Resource: "endpointslices"},
	} {
		ra := ra
		rev, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			return APIError("ask whether --services may create", ra.Resource, err)
		}
		if !rev.Status.Allowed {
			res := ra.Resource
			if ra.Group != "" {
				res += "." + ra.Group
			}
			return fmt.Errorf("--services %d: %w: cannot %s %s in namespace %s (grant create/delete on services and endpointslices.discovery.k8s.io there, or drop --services)",
				n, ErrServicesForbidden, ra.Verb, res, ns)
		}
	}
	if qs, err := cs.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, q := range qs.Items {
			for _, res := range []corev1.ResourceName{corev1.ResourceServices, "count/services", "count/endpointslices.discovery.k8s.io"} {
				hard, ok := q.Status.Hard[res]
				if !ok {
					hard, ok = q.Spec.Hard[res]
				}
				if !ok {
					continue
				}
				used := q.Status.Used[res]
				// +1: the measured Service counts too.
				if free := hard.Value() - used.Value(); int64(n)+1 > free {
					return errkind.Errorf(ErrInvalid, "--services %d: ResourceQuota %s/%s allows %d more %s (hard %d, used %d)",
						n, ns, q.Name, max(free, 0), res, hard.Value(), used.Value())
				}
			}
		}
	}
	if free, cidrs, ok := freeServiceIPs(ctx, cs); ok && int64(n)+1 > free {
		return errkind.Errorf(ErrInvalid, "--services %d: the Service CIDR (%s) has %d free addresses", n, cidrs, max(free, 0))
	}
	return nil
}

// freeServiceIPs counts the free IPv4 ClusterIPs from the ServiceCIDR
// objects, when the cluster serves them and lets us list Services.
func freeServiceIPs(ctx context.Context, cs kubernetes.Interface) (int64, string, bool) {
	sc, err := cs.NetworkingV1beta1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil || len(sc.Items) == 0 {
		return 0, "", false
	}
	var size int64
	var names string
	for _, c := range sc.Items {
		for _, s := range c.Spec.CIDRs {
			p, err := netip.ParsePrefix(s)
			if err != nil || !p.Addr().Is4() {
				continue
			}
			// Network and broadcast addresses are never handed out.
			size += int64(1)<<(32-p.Bits()) - 2
			if names != "" {
				names += ", "
			}
			names += s
		}
	}
	if size == 0 {
		return 0, "", false
	}
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, "", false
	}
	var used int64
	for _, s := range svcs.Items {
		if ip, err := netip.ParseAddr(s.Spec.ClusterIP); err == nil && ip.Is4() {
			used++
		}
	}
	return size - used, names, true
}

// createFillers creates n filler Services and their slices, fillerWorkers
// at a time. It stops at the first error (the caller's cleanup deletes
// what was made, by label) and when ctx ends. progress, if set, is called
// after every 1,000 Services.
func createFillers(ctx context.Context, cs kubernetes.Interface, po PodOptions, n int, progress func(done int)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next    atomic.Int64
		done    atomic.Int64
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { first = err; cancel() })
	}
	for w := 0; w < min(fillerWorkers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if _, err := cs.CoreV1().Services(po.Namespace).Create(ctx, FillerService(po, i), metav1.CreateOptions{}); err != nil {
					fail(APIError("create", "filler service "+FillerName(po.RunID, i), err))
					return
				}
				if _, err := cs.DiscoveryV1().EndpointSlices(po.Namespace).Create(ctx, FillerSlice(po, i), metav1.CreateOptions{}); err != nil {
					fail(APIError("create", "endpointslice "+FillerName(po.RunID, i), err))
					return
				}
				if d := done.Add(1); progress != nil && d%1000 == 0 {
					progress(int(d))
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// deleteEach deletes the named objects fillerWorkers at a time; "not
// found" counts as deleted.
func deleteEach(ctx context.Context, names []string, del func(ctx context.Context, name string) error) error {
	var (
		mu   sync.Mutex
		errs []error
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for w := 0; w < min(fillerWorkers, len(names)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) || ctx.Err() != nil {
					return
				}
				if err := del(ctx, names[i]); err != nil && !apierrors.IsNotFound(err) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d deletes failed, first: %w", len(errs), errs[0])
	}
	return ctx.Err()
}

// deleteSlices removes the EndpointSlices matching selector in ns (all
// namespaces when ""): one DeleteCollection per namespace where the API
// allows it, one by one otherwise.
func deleteSlices(ctx context.Context, cs kubernetes.Interface, ns, selector string) error {
	lo := metav1.ListOptions{LabelSelector: selector}
	sl, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, lo)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return APIError("list", "endpointslices", err)
	}
	byNS := map[string][]string{}
	for _, s := range sl.Items {
		byNS[s.Namespace] = append(byNS[s.Namespace], s.Name)
	}
	var errs []error
	for n, names := range byNS {
		api := cs.DiscoveryV1().EndpointSlices(n)
		err := deleteAll(ctx, names, lo,
			func(ctx context.Context) error { return api.DeleteCollection(ctx, metav1.DeleteOptions{}, lo) },
			func(ctx context.Context) ([]string, error) { return objectNames(api.List(ctx, lo)) },
			func(ctx context.Context, name string) error { return api.Delete(ctx, name, metav1.DeleteOptions{}) })
		if err != nil {
			errs = append(errs, APIError("delete", "endpointslices in "+n, err))
		}
	}
	return errors.Join(errs...)
}

// deleteServiceCollection is DELETE on the namespace's services collection
// with a label selector: the API server has it, client-go's typed Service
// client does not, so it goes through the REST client.
func deleteServiceCollection(ctx context.Context, cs kubernetes.Interface, ns string, lo metav1.ListOptions) error {
	rc, ok := cs.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return errors.New("no REST client")
	}
	return rc.Delete().Namespace(ns).Resource("services").
		VersionedParams(&lo, scheme.ParameterCodec).Do(ctx).Error()
}

// deleteAll deletes names: one DeleteCollection call where the API allows
// it (a single request instead of thousands), then whatever is left — an
// API without it, a call that timed out half way, a fake clientset that
// ignores it — one by one, many at once.
func deleteAll(ctx context.Context, names []string, _ metav1.ListOptions,
	collection func(context.Context) error, list func(context.Context) ([]string, error),
	one func(context.Context, string) error) error {
	if len(names) > 1 {
		if err := collection(ctx); err == nil || ctx.Err() == nil {
			if left, err := list(ctx); err == nil {
				names = left
			}
		}
	}
	return deleteEach(ctx, names, one)
}

// fillerRate formats a creation rate for the log.
func fillerRate(n int, d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf("%.0f/s", float64(n)/d.Seconds())
}

// WaitTCP dials addr until a TCP connection is accepted, or timeout. It is
// what the dataplane probe pod runs (`cnibench k8s wait-tcp`): a ClusterIP
// accepts once the client node's service rules carry it.
func WaitTCP(ctx context.Context, addr string, timeout time.Duration) (time.Duration, error) {
	t0 := time.Now()
	deadline := t0.Add(timeout)
	var last error
	for {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return time.Since(t0), nil
		}
		last = err
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s did not accept a connection within %s: %w", addr, timeout, last)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// dataplaneProbeName names the service scenario's dataplane probe pod.
func dataplaneProbeName(runID string) string { return runid.Name(runID, "service-wait") }

// DataplaneProbePod waits, on the client's node, until target:port answers.
func DataplaneProbePod(o PodOptions, p Placement, target string, timeout time.Duration) *corev1.Pod {
	pod := o.basePod(dataplaneProbeName(o.RunID), p.Scenario, "probe", Placement{}, p.ClientNode)
	pod.Spec.Containers[0].Args = []string{"k8s", "wait-tcp", net.JoinHostPort(target, strconv.Itoa(o.port())), "--timeout", timeout.String()}
	pod.Spec.Containers[0].Env = nil
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.ActiveDeadlineSeconds = ptr(max(1, int64(timeout.Seconds())+30))
	return pod
}

// waitDataplane runs the dataplane probe pod to completion.
func (r *Runner) waitDataplane(ctx context.Context, po PodOptions, p Placement, target string, timeout time.Duration) error {
	done, line, err := r.runProbe(ctx, DataplaneProbePod(po, p, target, timeout), timeout+time.Minute)
	if err != nil {
		return fmt.Errorf("waiting for %s to answer: %w", target, err)
	}
	if done.Status.Phase != corev1.PodSucceeded {
		msg := Explain(done, nil)
		if line != "" {
			msg += "; log: " + line
		}
		return fmt.Errorf("the Service's address %s never answered from node %s: %s", target, p.ClientNode, oneLine(msg))
	}
	return nil
}

// runProbe creates a probe pod, waits (up to wait) until it has finished,
// reads its log's last line and deletes it, whatever happened.
func (r *Runner) runProbe(ctx context.Context, pod *corev1.Pod, wait time.Duration) (*corev1.Pod, string, error) {
	api := r.Client.CoreV1().Pods(pod.Namespace)
	if _, err := api.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, "", APIError("create", "probe pod", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = api.Delete(dctx, pod.Name, metav1.DeleteOptions{})
	}()
	done, err := r.waitPod(ctx, pod.Namespace, pod.Name, wait, podFinished)
	if err != nil {
		return nil, "", err
	}
	line := ""
	if b, err := r.logs(ctx, pod.Namespace, pod.Name, containerName); err == nil && len(b) > 0 {
		line = lastLine(b)
	}
	return done, line, nil
}
