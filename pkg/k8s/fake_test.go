package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cnibench/cnibench/pkg/result"
)

// fakeCluster is a fake clientset plus a "kubelet" made of reactors: pods
// get a node, an IP and a phase the moment they are created, Services get
// a ClusterIP and an EndpointSlice, DaemonSets get one pod per node. What
// the kubelet does to each pod is decided by the test through serverState
// and clientState, so error paths are as easy to drive as the happy one.
type fakeCluster struct {
	// cs holds the objects and the "kubelet"; api is the clientset the
	// code under test is given, which passes every call on to cs and
	// records only the calls of that code, not the test's own (rbac_test.go).
	cs    *fake.Clientset
	api   *fake.Clientset
	nodes map[string]string // name -> InternalIP

	mu      sync.Mutex
	created []*corev1.Pod // every pod as created (spec as sent)
	nextIP  int
	// serverState and clientState mutate a freshly created pod's status;
	// nil means "came up fine".
	serverState func(*corev1.Pod)
	clientState func(*corev1.Pod)
	// probeState does the same for probe pods (node probe, wait-tcp, wait-idle).
	probeState func(*corev1.Pod)
	// logs answers Runner.Logs; nil returns a valid result set.
	logs func(pod *corev1.Pod, container string) ([]byte, error)
	// probe is what every node probe pod prints; the zero value is a
	// bridge node with kube-proxy in iptables mode.
	probe *NodeProbe
	// meter is what an agent meter pod has printed when its log is read.
	meter func(pod *corev1.Pod) []byte
}

func readyNode(name, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			NodeInfo: corev1.NodeSystemInfo{KernelVersion: "6.1.0-test", OSImage: "Debian GNU/Linux 12 (bookworm)",
				ContainerRuntimeVersion: "containerd://1.6.20", KubeletVersion: "v1.31.4", Architecture: "amd64"},
		},
	}
}

func newFakeCluster(t *testing.T, nodes ...string) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{nodes: map[string]string{}}
	var objs []runtime.Object
	for i, n := range nodes {
		ip := fmt.Sprintf("10.250.0.%d", i+2)
		fc.nodes[n] = ip
		objs = append(objs, readyNode(n, ip))
	}
	objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "coredns-abc", Namespace: "kube-system"}})
	fc.cs = fake.NewSimpleClientset(objs...)
	fc.api = fake.NewSimpleClientset()
	fc.api.ReactionChain, fc.api.WatchReactionChain, fc.api.ProxyReactionChain = nil, nil, nil
	fc.api.AddReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := fc.cs.Invokes(a, nil)
		return true, obj, err
	})
	fc.api.AddWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := fc.cs.InvokesWatch(a)
		return true, w, err
	})
	fc.api.AddProxyReactor("*", func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		return true, fc.cs.InvokesProxy(a), nil
	})
	fc.api.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.31.4"}
	t.Cleanup(func() {
		for _, a := range fc.api.Actions() {
			noteCall(a)
		}
	})
	fc.cs.PrependReactor("create", "pods", fc.createPod)
	fc.cs.PrependReactor("create", "services", fc.createService)
	fc.cs.PrependReactor("create", "daemonsets", fc.createDaemonSet)
	// The fake has no authorizer: everything is allowed unless a test says
	// otherwise.
	fc.cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rev := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview)
		rev.Status.Allowed = true
		return true, rev, nil
	})
	return fc
}

// pinnedNode reads the node a pod's affinity requires.
func pinnedNode(p *corev1.Pod) string {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

func (fc *fakeCluster) createPod(a k8stesting.Action) (bool, runtime.Object, error) {
	pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.created = append(fc.created, pod.DeepCopy())
	node := pinnedNode(pod)
	if node == "" {
		node = pod.Spec.NodeName
	}
	if _, ok := fc.nodes[node]; !ok {
		pod.Status.Phase = corev1.PodPending
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."}}
		return false, nil, nil
	}
	pod.Spec.NodeName = node
	fc.nextIP++
	pod.Status.PodIP = fmt.Sprintf("10.244.%d.%d", 1+fc.nextIP/200, fc.nextIP%200+2)
	if pod.Spec.HostNetwork {
		pod.Status.PodIP = fc.nodes[node]
	}
	switch pod.Labels[LabelRole] {
	case "server":
		pod.Status.Phase = corev1.PodRunning
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if fc.serverState != nil {
			fc.serverState(pod)
		}
		if pod.Labels[LabelScenario] == ScenarioService {
			fc.addSlice(pod)
		}
	case "client":
		pod.Status.Phase = corev1.PodSucceeded
		if fc.clientState != nil {
			fc.clientState(pod)
		}
	case "probe":
		pod.Status.Phase = corev1.PodSucceeded
		if fc.probeState != nil {
			fc.probeState(pod)
		}
	case "meter":
		pod.Status.Phase = corev1.PodRunning
	}
	return false, nil, nil // let the tracker store the mutated pod
}

func (fc *fakeCluster) addSlice(server *corev1.Pod) {
	ready := true
	_ = fc.cs.Tracker().Add(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-slice", Namespace: server.Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: ServiceName(server.Labels[LabelRun])}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{server.Status.PodIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	})
}

func (fc *fakeCluster) createService(a k8stesting.Action) (bool, runtime.Object, error) {
	svc := a.(k8stesting.CreateAction).GetObject().(*corev1.Service)
	svc.Spec.ClusterIP = "10.96.0.42"
	return false, nil, nil
}

// createDaemonSet plays the DaemonSet controller and kubelet: one pod per
// node whose audit init container has exited 0.
func (fc *fakeCluster) createDaemonSet(a k8stesting.Action) (bool, runtime.Object, error) {
	ds := a.(k8stesting.CreateAction).GetObject().(*appsv1.DaemonSet)
	ds.Status.DesiredNumberScheduled = int32(len(fc.nodes))
	for n := range fc.nodes {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + n, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels},
			Spec:       *ds.Spec.Template.Spec.DeepCopy(),
		}
		p.Spec.NodeName = n
		p.Status.Phase = corev1.PodRunning
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: auditContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}
		if fc.serverState != nil {
			fc.serverState(p)
		}
		if err := fc.cs.Tracker().Add(p); err != nil {
			return true, nil, err
		}
	}
	return false, nil, nil
}

// resultSet is what a client pod would print for its arguments.
func resultSet(pod *corev1.Pod) []byte {
	args := pod.Spec.Containers[0].Args
	var target string
	var tests []string
	for i := range args {
		switch args[i] {
		case "--server":
			target = args[i+1]
		case "--test":
			tests = strings.Split(args[i+1], ",")
		}
	}
	set := result.Set{Schema: result.SetSchemaVersion}
	for _, t := range tests {
		r := result.New(result.Tool{Name: "cnibench"}, t, 1)
		r.Server = target
		r.Latency = &result.Latency{OneWayNs: result.Dist{Count: 10, Mean: result.F(12000)}}
		set.Results = append(set.Results, r)
	}
	b, _ := json.MarshalIndent(set, "", "  ")
	return append([]byte("cnibench client: warming up\n"), b...)
}

func (fc *fakeCluster) runner() *Runner {
	return &Runner{Client: fc.api, RunID: "t3st", Poll: 1, Logs: func(ctx context.Context, ns, name, container string) ([]byte, error) {
		// The call Runner's own Logs makes, for the RBAC check; the
		// fake answers "fake logs", so the log is made up below.
		_, _ = fc.api.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		pod, err := fc.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if pod.Labels[LabelRole] == "probe" {
			return fc.probeLog(pod), nil
		}
		if pod.Labels[LabelRole] == "meter" {
			if fc.meter == nil {
				return nil, nil
			}
			return fc.meter(pod), nil
		}
		if fc.logs != nil {
			return fc.logs(pod, container)
		}
		return resultSet(pod), nil
	}}
}

// probeLog is what a probe pod prints: node-info JSON or wait-tcp's line.
func (fc *fakeCluster) probeLog(pod *corev1.Pod) []byte {
	args := pod.Spec.Containers[0].Args
	if len(args) > 1 && args[1] == "wait-tcp" {
		return []byte(args[2] + " accepted after 0.01s\n")
	}
	if len(args) > 1 && args[1] == "wait-idle" {
		return []byte("93 % idle over 3s after 3.0s\n")
	}
	p := NodeProbe{KubeProxyMode: "iptables", Links: []string{"cni0:bridge", "eth0:veth", "lo:device"}, Agents: []string{"kube-proxy"}}
	if fc.probe != nil {
		p = *fc.probe
	}
	b, _ := json.Marshal(p)
	return append(b, '\n')
}

func (fc *fakeCluster) createdPods() []*corev1.Pod {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return append([]*corev1.Pod(nil), fc.created...)
}

// leftovers lists every cnibench object still in the fake cluster.
func (fc *fakeCluster) leftovers(t *testing.T) []string {
	t.Helper()
	lo := metav1.ListOptions{LabelSelector: ManagedSelector}
	return listObjects(context.Background(), fc.cs, lo, append(slices.Clone(labeledKinds),
		objectKind{"endpointslice", func(ctx context.Context, cs kubernetes.Interface, lo metav1.ListOptions) (runtime.Object, error) {
			return cs.DiscoveryV1().EndpointSlices("").List(ctx, lo)
		}},
		objectKind{"namespace", func(ctx context.Context, cs kubernetes.Interface, lo metav1.ListOptions) (runtime.Object, error) {
			return cs.CoreV1().Namespaces().List(ctx, lo)
		}}))
}

// prepare plans a run of o on the fake cluster with a fresh runner; a
// planning error fails the test.
func (fc *fakeCluster) prepare(t *testing.T, o Options) (*Runner, *Plan) {
	t.Helper()
	r := fc.runner()
	plan, err := r.Prepare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return r, plan
}

// wantClean fails the test if the run left any cnibench object behind.
func (fc *fakeCluster) wantClean(t *testing.T) {
	t.Helper()
	if left := fc.leftovers(t); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}
