package k8s

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

func testOptions() Options {
	return Options{
		Image: "localhost/cnibench:test", PullPolicy: corev1.PullNever,
		Scenarios: Scenarios, Repeats: 2,
		Client:       ClientArgs{Tests: []string{"tcp_lat", "udp_lat"}, MsgSizes: "1", Duration: "1s", Warmup: "0s"},
		ReadyTimeout: 200 * time.Millisecond, MeasureTimeout: time.Second,
	}
}

func argAfter(args []string, flag string) string {
	for i := range args[:len(args)-1] {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

func TestExecuteAllScenariosTwoNodes(t *testing.T) {
	fc := newFakeCluster(t, "n2", "n1")
	o := testOptions()
	ctx := context.Background()
	r, plan := fc.prepare(t, o)
	if plan.Cluster.Version != "v1.31.4" || len(plan.Cluster.Nodes) != 2 || plan.Cluster.CNI != cniUnknown {
		t.Errorf("fingerprint: %+v", plan.Cluster)
	}
	var samples []Sample
	onSample := func(s Sample) error {
		samples = append(samples, s)
		// While the run lasts, its pods read a fresh token from its Secret.
		sec, err := fc.cs.CoreV1().Secrets(plan.Namespace).Get(ctx, TokenSecretName(plan.RunID), metav1.GetOptions{})
		if err != nil || len(sec.Data[TokenKey]) != 64 {
			t.Errorf("token secret during the run: %v", err)
		}
		return nil
	}
	if err := r.Execute(ctx, plan, o, onSample); err != nil {
		t.Fatal(err)
	}
	if len(samples) != 8 {
		t.Fatalf("%d samples, want 4 scenarios × 2 repeats", len(samples))
	}
	// Interleaved: each repeat covers every scenario once.
	for rep := 1; rep <= 2; rep++ {
		var got []string
		for _, s := range samples {
			if s.Repeat == rep {
				got = append(got, s.Scenario)
			}
		}
		slices.Sort(got)
		want := slices.Clone(Scenarios)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("repeat %d covered %v", rep, got)
		}
	}
	servers := map[string]*corev1.Pod{}
	for _, p := range fc.createdPods() {
		if p.Labels[LabelRole] == "server" {
			servers[p.Labels[LabelScenario]] = p
		}
	}
	for _, s := range samples {
		if s.Error != "" || len(s.Results) != 2 {
			t.Fatalf("%s: error %q, %d results", s.Pod, s.Error, len(s.Results))
		}
		// The client really aimed at the target the runner chose.
		if s.Results[0].Server != s.Target {
			t.Errorf("%s: result from %s, target %s", s.Pod, s.Results[0].Server, s.Target)
		}
		switch s.Scenario {
		case ScenarioService:
			if s.Target != "10.96.0.42" {
				t.Errorf("service target %s, want the ClusterIP", s.Target)
			}
		case ScenarioHost:
			if s.Target != fc.nodes["n2"] {
				t.Errorf("host-network target %s, want server node IP %s", s.Target, fc.nodes["n2"])
			}
		default:
			if !strings.HasPrefix(s.Target, "10.244.") {
				t.Errorf("%s target %s, want a pod IP", s.Scenario, s.Target)
			}
		}
	}
	// Placement: nodes sorted by name, client on n1; same-node stays on n1.
	for _, p := range fc.createdPods() {
		node := pinnedNode(p)
		sc, role := p.Labels[LabelScenario], p.Labels[LabelRole]
		if role == "probe" {
			continue
		}
		want := "n1"
		if sc != ScenarioSameNode && role == "server" {
			want = "n2"
		}
		if node != want {
			t.Errorf("%s (%s %s) pinned to %q, want %s", p.Name, sc, role, node, want)
		}
		if p.Spec.HostNetwork != (sc == ScenarioHost) {
			t.Errorf("%s: hostNetwork %v", p.Name, p.Spec.HostNetwork)
		}
		if p.Labels[LabelRun] != "t3st" || p.Namespace != DefaultNamespace {
			t.Errorf("%s: labels %v namespace %s", p.Name, p.Labels, p.Namespace)
		}
	}
	fc.wantClean(t)
}

func TestExecuteOneNodeSkipsCrossNode(t *testing.T) {
	fc := newFakeCluster(t, "only")
	o := testOptions()
	o.Repeats = 1
	r, plan := fc.prepare(t, o)
	skipped := map[string]string{}
	for _, p := range plan.Placements {
		if p.Skip != "" {
			skipped[p.Scenario] = p.Skip
		}
	}
	if len(skipped) != 2 || !strings.Contains(skipped[ScenarioCrossNode], "two schedulable nodes") || skipped[ScenarioHost] == "" {
		t.Fatalf("skipped %v, want pod-cross-node and host-network with a reason", skipped)
	}
	var got []string
	if err := r.Execute(context.Background(), plan, o, func(s Sample) error { got = append(got, s.Scenario); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{ScenarioSameNode, ScenarioService}) {
		t.Errorf("ran %v", got)
	}
}

func TestExecuteCleansUpWhenServerFails(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	fc.serverState = func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = nil
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: `Container image "localhost/cnibench:test" is not present with pull policy of Never`}}}}
	}
	o := testOptions()
	r, plan := fc.prepare(t, o)
	err := r.Execute(context.Background(), plan, o, nil)
	if err == nil || !strings.Contains(err.Error(), "image pull error") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want a one-line image pull error, got %v", err)
	}
	fc.wantClean(t)
}

func TestExecuteUnschedulableTimesOut(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	o := testOptions()
	o.Scenarios = []string{ScenarioSameNode}
	r, plan := fc.prepare(t, o)
	// The node vanishes between planning and scheduling.
	delete(fc.nodes, "n1")
	err := r.Execute(context.Background(), plan, o, nil)
	if err == nil || !strings.Contains(err.Error(), "unschedulable") || !strings.Contains(err.Error(), "not ready after") {
		t.Fatalf("want unschedulable after timeout, got %v", err)
	}
	fc.wantClean(t)
}

// failingServiceClients is a two-node cluster whose service scenario's
// client pods fail with a connection refused in their log.
func failingServiceClients(t *testing.T) *fakeCluster {
	fc := newFakeCluster(t, "n1", "n2")
	fc.clientState = func(p *corev1.Pod) {
		if p.Labels[LabelScenario] == ScenarioService {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
		}
	}
	fc.logs = func(p *corev1.Pod, _ string) ([]byte, error) {
		if p.Status.Phase == corev1.PodFailed {
			return []byte("cnibench: connect 10.96.0.42:7420: connection refused\n"), nil
		}
		return resultSet(p), nil
	}
	return fc
}

func TestExecuteClientFailureIsRecordedAndRunContinues(t *testing.T) {
	fc := failingServiceClients(t)
	o := testOptions()
	r, plan := fc.prepare(t, o)
	var samples []Sample
	err := r.Execute(context.Background(), plan, o, func(s Sample) error { samples = append(samples, s); return nil })
	if err == nil || !strings.Contains(err.Error(), "2 of 8 client pods failed") {
		t.Fatalf("want 2 of 8 failed, got %v", err)
	}
	for _, s := range samples {
		failed := s.Error != ""
		if failed != (s.Scenario == ScenarioService) {
			t.Errorf("%s: error %q", s.Pod, s.Error)
		}
		if failed && !strings.Contains(s.Error, "connection refused") {
			t.Errorf("failure does not carry the log line: %s", s.Error)
		}
	}
	fc.wantClean(t)
}

func TestExecuteCancelCleansUp(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	o := testOptions()
	r, plan := fc.prepare(t, o)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := r.Execute(ctx, plan, o, func(Sample) error {
		if n++; n == 3 {
			cancel() // Ctrl-C in the middle of the run
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted after 3 of 8") {
		t.Fatalf("want interrupted after 3 of 8, got %v", err)
	}
	fc.wantClean(t)
}

func TestExecuteKeepsForeignNamespace(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	ctx := context.Background()
	if _, err := fc.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "perf"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.Namespace, o.Repeats = "perf", 1
	r, plan := fc.prepare(t, o)
	if err := r.Execute(ctx, plan, o, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.cs.CoreV1().Namespaces().Get(ctx, "perf", metav1.GetOptions{}); err != nil {
		t.Errorf("the user's namespace was deleted: %v", err)
	}
	fc.wantClean(t)
}

func TestExecuteRBACDenied(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	fc.cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`User "dev" cannot create resource "pods" in API group "" in the namespace "cnibench"`))
	})
	o := testOptions()
	r, plan := fc.prepare(t, o)
	err := r.Execute(context.Background(), plan, o, nil)
	if err == nil || !strings.Contains(err.Error(), "RBAC denied: cannot create server pod") {
		t.Fatalf("want RBAC denied, got %v", err)
	}
	fc.wantClean(t)
}

// TestExecuteSettle: with SettleIdle every client node gets a wait-idle
// probe before the first client pod, and nothing is left afterwards.
func TestExecuteSettle(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	o := testOptions()
	o.SettleIdle = 70
	var log bytes.Buffer
	o.Log = &log
	ctx := context.Background()
	r, plan := fc.prepare(t, o)
	if err := r.Execute(ctx, plan, o, func(Sample) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, p := range fc.createdPods() {
		switch a := p.Spec.Containers[0].Args; {
		case len(a) > 1 && a[1] == "wait-idle":
			if argAfter(a, "--min-idle") != "70" {
				t.Errorf("settle probe args %v", a)
			}
			order = append(order, "settle:"+pinnedNode(p))
		case p.Labels[LabelRole] == "client":
			order = append(order, "client")
		}
	}
	// Every scenario's client node is n1 here (n2 serves the cross-node ones).
	if i := slices.Index(order, "client"); i != 1 || order[0] != "settle:n1" {
		t.Errorf("pods in creation order %v; want the settle probe on n1 first, then the clients", order)
	}
	if !strings.Contains(log.String(), "settle: n1: 93 % idle") {
		t.Errorf("log does not report the settle: %s", log.String())
	}
	fc.wantClean(t)
}

// TestExecuteSettleTimeoutMeasuresAnyway: a node that never settles is a
// warning in the log, and the run still measures.
func TestExecuteSettleTimeoutMeasuresAnyway(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	fc.probeState = func(pod *corev1.Pod) {
		if a := pod.Spec.Containers[0].Args; len(a) > 1 && a[1] == "wait-idle" {
			pod.Status.Phase = corev1.PodFailed
		}
	}
	o := testOptions()
	o.Scenarios = []string{ScenarioCrossNode}
	o.SettleIdle = 70
	var log bytes.Buffer
	o.Log = &log
	ctx := context.Background()
	r, plan := fc.prepare(t, o)
	measured := 0
	if err := r.Execute(ctx, plan, o, func(Sample) error { measured++; return nil }); err != nil {
		t.Fatal(err)
	}
	if measured == 0 || !strings.Contains(log.String(), "settle: n1: WARNING: measuring anyway") {
		t.Errorf("%d samples; log: %s", measured, log.String())
	}
}

func TestClean(t *testing.T) {
	fc := newFakeCluster(t, "n1")
	ctx := context.Background()
	mk := func(ns, name string, labels map[string]string) {
		if _, err := fc.cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ours := map[string]string{LabelManagedBy: ManagedBy, LabelRun: "old1"}
	fc.cs.CoreV1().Namespaces().Create(ctx, NamespaceSpec("cnibench", "old1"), metav1.CreateOptions{})
	fc.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
	mk("cnibench", "cnb-old1-a", ours)
	mk("team", "cnb-old1-b", ours)
	mk("team", "their-app", map[string]string{"app": "web"})
	fc.cs.CoreV1().Services("team").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cnb-old1-svc", Namespace: "team", Labels: ours}}, metav1.CreateOptions{})
	fc.cs.CoreV1().Secrets("team").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cnb-old1-token", Namespace: "team", Labels: ours}}, metav1.CreateOptions{})

	removed, err := Clean(ctx, fc.api, time.Second, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 5 {
		t.Errorf("removed %v, want 2 pods, 1 service, 1 secret, 1 namespace", removed)
	}
	fc.wantClean(t)
	if _, err := fc.cs.CoreV1().Pods("team").Get(ctx, "their-app", metav1.GetOptions{}); err != nil {
		t.Errorf("clean deleted a pod it did not create: %v", err)
	}
	if _, err := fc.cs.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{}); err != nil {
		t.Errorf("clean deleted a namespace it did not create: %v", err)
	}
	// Twice is fine.
	removed, err = Clean(ctx, fc.api, time.Second, time.Millisecond)
	if err != nil || len(removed) != 0 {
		t.Errorf("second clean: %v %v", removed, err)
	}
}

func TestAudit(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	fc.logs = func(p *corev1.Pod, container string) ([]byte, error) {
		if container != auditContainer {
			t.Errorf("read log of container %q", container)
		}
		v := "212992"
		if p.Spec.NodeName == "n2" {
			v = "16777216"
		}
		return []byte(`[{"knob":"rmem_max","target":"","profile":"latency","current":"` + v + `","recommended":"16777216","status":"` +
			map[bool]string{true: "ok", false: "differs"}[v == "16777216"] + `"},
 {"knob":"nic_rings","target":"eth0","profile":"latency","current":"","status":"cannot read","why":"not available with --root"}]`), nil
	}
	r := fc.runner()
	audits, err := r.Audit(context.Background(), AuditOptions{Image: "localhost/cnibench:test", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(audits) != 2 || audits[0].Node != "n1" || len(audits[0].Findings) != 2 || audits[1].Error != "" {
		t.Fatalf("audits: %+v", audits)
	}
	var b strings.Builder
	if err := WriteAuditTable(&b, audits); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"KNOB", "n1", "n2", "212992 *", "16777216", "eth0", "?"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	fc.wantClean(t)
}

func TestAuditReportsFailedNode(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	fc.serverState = func(p *corev1.Pod) {
		if p.Spec.NodeName == "n2" {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: auditContainer, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image not present"}}}}
		}
	}
	fc.logs = func(*corev1.Pod, string) ([]byte, error) {
		return []byte(`[{"knob":"somaxconn","current":"4096","recommended":"4096","status":"ok"}]`), nil
	}
	audits, err := fc.runner().Audit(context.Background(), AuditOptions{Image: "x:1", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(audits) != 2 || audits[0].Error != "" || !strings.Contains(audits[1].Error, "image pull error") {
		t.Fatalf("audits: %+v", audits)
	}
	var b strings.Builder
	WriteAuditTable(&b, audits)
	if !strings.Contains(b.String(), "node n2: no audit: image pull error") {
		t.Errorf("table does not name the failed node:\n%s", b.String())
	}
}
