package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// serviceLog records the order Services are created in. (The fake
// clientset runs reactors under one lock, so the workers' overlap is not
// observable here; the real cluster's creation rate is in e2e-cni.)
type serviceLog struct {
	mu    sync.Mutex
	names []string
}

func (l *serviceLog) watch(fc *fakeCluster) {
	fc.cs.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l.mu.Lock()
		l.names = append(l.names, a.(k8stesting.CreateAction).GetObject().(*corev1.Service).Name)
		l.mu.Unlock()
		return false, nil, nil
	})
}

func servicesOptions(n int) Options {
	o := testOptions()
	o.Scenarios = []string{ScenarioService}
	o.Repeats = 1
	o.Services = n
	return o
}

func TestExecuteServicesFillersCreatedThenDeleted(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	var l serviceLog
	l.watch(fc)
	r := fc.runner()
	o := servicesOptions(2500)
	ctx := context.Background()
	plan, err := r.Prepare(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var during struct{ svcs, slices int }
	onSample := func(Sample) error {
		// While measuring, all fillers and their slices exist.
		svcs, _ := fc.cs.CoreV1().Services(plan.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelRole + "=" + roleFiller})
		sl, _ := fc.cs.DiscoveryV1().EndpointSlices(plan.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelRole + "=" + roleFiller})
		during.svcs, during.slices = len(svcs.Items), len(sl.Items)
		for _, s := range sl.Items {
			if s.Labels[discoveryv1.LabelServiceName] != s.Name || len(s.Endpoints) != 1 || s.Endpoints[0].Addresses[0] != PlaceholderAddress {
				t.Fatalf("slice %s: %+v", s.Name, s)
			}
		}
		return nil
	}
	if err := r.Execute(ctx, plan, o, onSample); err != nil {
		t.Fatal(err)
	}
	if during.svcs != 2500 || during.slices != 2500 {
		t.Errorf("during the measurement: %d filler services, %d slices; want 2500 each", during.svcs, during.slices)
	}
	if len(l.names) != 2501 || l.names[2500] != ServiceName(plan.RunID) {
		t.Errorf("%d services created, last %q; want 2500 fillers then the measured Service", len(l.names), l.names[len(l.names)-1])
	}
	if left := fc.leftovers(t); len(left) != 0 {
		t.Errorf("left behind: %d objects, e.g. %v", len(left), left[:min(3, len(left))])
	}
	// The dataplane probe ran on the client's node against the ClusterIP.
	var probed bool
	for _, p := range fc.createdPods() {
		if a := p.Spec.Containers[0].Args; p.Name == dataplaneProbeName(plan.RunID) && a[1] == "wait-tcp" && a[2] == "10.96.0.42:7420" && pinnedNode(p) == "n1" {
			probed = true
		}
	}
	if !probed {
		t.Error("no wait-tcp probe pod on the client node")
	}
	run := StoreRun(plan, o, "test", "")
	if run.Labels["k8s.services"] != "2500" || !strings.Contains(run.Arms[0].Description, "behind 2500 other Services") {
		t.Errorf("stored run does not say 2500 services: %v %q", run.Labels, run.Arms[0].Description)
	}
}

func TestExecuteServicesCreateFailureCleansUp(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	var n atomic.Int32
	fc.cs.PrependReactor("create", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if n.Add(1) == 300 {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	r := fc.runner()
	o := servicesOptions(1000)
	plan, err := r.Prepare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Execute(context.Background(), plan, o, nil)
	if err == nil || !strings.Contains(err.Error(), "creating 1000 filler services") || !strings.Contains(err.Error(), "request timed out") {
		t.Fatalf("want the create error, got %v", err)
	}
	if left := fc.leftovers(t); len(left) != 0 {
		t.Errorf("left behind after failure: %d objects, e.g. %v", len(left), left[:min(3, len(left))])
	}
}

func TestExecuteServicesInterruptCleansUp(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n atomic.Int32
	fc.cs.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if n.Add(1) == 700 {
			cancel() // Ctrl-C half way through the fillers
		}
		return false, nil, nil
	})
	r := fc.runner()
	o := servicesOptions(5000)
	plan, err := r.Prepare(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Execute(ctx, plan, o, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if c := n.Load(); c >= 5000 {
		t.Errorf("%d services created after Ctrl-C at 700: creation did not stop", c)
	}
	if left := fc.leftovers(t); len(left) != 0 {
		t.Errorf("left behind after Ctrl-C: %d objects, e.g. %v", len(left), left[:min(3, len(left))])
	}
}

// checkNothingCreated fails when Prepare sent anything but reads and
// access reviews.
func checkNothingCreated(t *testing.T, fc *fakeCluster) {
	t.Helper()
	for _, a := range fc.cs.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetResource().Resource != "selfsubjectaccessreviews" {
			t.Errorf("Prepare sent %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestServicesRefusedBeforeAnythingIsCreated(t *testing.T) {
	cases := []struct {
		name  string
		n     int
		setup func(*fakeCluster)
		want  string
		typed func(error) bool
	}{
		{name: "beyond cnibench's bound", n: MaxServices + 1, want: fmt.Sprintf("must be 0-%d", MaxServices),
			typed: func(err error) bool { return errors.Is(err, ErrInvalid) }},
		{name: "negative", n: -1, want: "must be 0-",
			typed: func(err error) bool { return errors.Is(err, ErrInvalid) }},
		{name: "RBAC", n: 10, setup: func(fc *fakeCluster) {
			fc.cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				rev := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview)
				rev.Status.Allowed = rev.Spec.ResourceAttributes.Resource != "endpointslices" || rev.Spec.ResourceAttributes.Verb != "create"
				return true, rev, nil
			})
		}, want: "cannot create endpointslices.discovery.k8s.io in namespace cnibench",
			// Not the user's command line: RBAC is fixed on the cluster (exit 1).
			typed: func(err error) bool { return errors.Is(err, ErrServicesForbidden) && !errors.Is(err, ErrInvalid) }},
		{name: "quota", n: 200, setup: func(fc *fakeCluster) {
			q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: DefaultNamespace},
				Status: corev1.ResourceQuotaStatus{
					Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("100")},
					Used: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("5")}}}
			_ = fc.cs.Tracker().Add(q)
		}, want: "ResourceQuota cnibench/small allows 95 more services",
			typed: func(err error) bool { return errors.Is(err, ErrInvalid) }},
		{name: "service CIDR", n: 300, setup: func(fc *fakeCluster) {
			_ = fc.cs.Tracker().Add(&networkingv1beta1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
				Spec: networkingv1beta1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/24"}}})
			_ = fc.cs.Tracker().Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
				Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1"}})
		}, want: "the Service CIDR (10.96.0.0/24) has 253 free addresses",
			typed: func(err error) bool { return errors.Is(err, ErrInvalid) }},
		{name: "no service scenario", n: 10, want: "needs the service scenario",
			typed: func(err error) bool { return errors.Is(err, ErrInvalid) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeCluster(t, "n1", "n2")
			if tc.setup != nil {
				tc.setup(fc)
			}
			o := servicesOptions(tc.n)
			if tc.name == "no service scenario" {
				o.Scenarios = []string{ScenarioCrossNode}
			}
			_, err := fc.runner().Prepare(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") || !tc.typed(err) {
				t.Fatalf("want a one-line typed error with %q, got %v", tc.want, err)
			}
			checkNothingCreated(t, fc)
		})
	}
	// Within every limit: accepted.
	fc := newFakeCluster(t, "n1", "n2")
	_ = fc.cs.Tracker().Add(&networkingv1beta1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec: networkingv1beta1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16"}}})
	if _, err := fc.runner().Prepare(context.Background(), servicesOptions(10000)); err != nil {
		t.Errorf("10000 services in a /16: %v", err)
	}
}
