package k8s

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Each wait gives up after its own timeout with a message that names what
// it waited for. The fake clientset has no controllers, so what a test puts
// in it stays as it is and every wait below runs into its timeout.

const shortWait = 30 * time.Millisecond

// timedOut runs wait and checks that it returned no sooner than its
// timeout, and not stuck long after it.
func timedOut(t *testing.T, wait func() error) error {
	t.Helper()
	t0 := time.Now()
	err := wait()
	if d := time.Since(t0); d < shortWait || d > 10*time.Second {
		t.Errorf("returned after %v, want about %v", d, shortWait)
	}
	if err == nil {
		t.Fatal("no error after the timeout")
	}
	return err
}

func wantIn(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q lacks %q", err, p)
		}
	}
}

func pendingPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{LabelManagedBy: ManagedBy, LabelRun: "t3st"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
}

func TestWaitPodTimeout(t *testing.T) {
	r := &Runner{Client: fake.NewSimpleClientset(pendingPod("cnibench", "cnb-t3st-srv")), Poll: time.Millisecond}
	err := timedOut(t, func() error {
		_, err := r.waitPod(context.Background(), "cnibench", "cnb-t3st-srv", shortWait, podReady)
		return err
	})
	wantIn(t, err, "not ready after 30ms", "pod is Pending with no warning events")

	// The caller's ctx ends the wait with its own error, not a timeout.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.waitPod(ctx, "cnibench", "cnb-t3st-srv", time.Minute, podReady); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestWaitServiceTimeout(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cnb-t3st-svc", Namespace: "cnibench"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.42"}}
	r := &Runner{Client: fake.NewSimpleClientset(svc), Poll: time.Millisecond}
	err := timedOut(t, func() error {
		_, err := r.waitService(context.Background(), "cnibench", "cnb-t3st-svc", "10.244.1.7", shortWait)
		return err
	})
	wantIn(t, err, "service cnb-t3st-svc: no ready endpoint for 10.244.1.7 after 30ms")
}

func TestEnsureNamespaceTimeout(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cnibench"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	r := &Runner{Client: fake.NewSimpleClientset(ns), Poll: time.Millisecond}
	err := timedOut(t, func() error {
		_, err := r.ensureNamespace(context.Background(), "cnibench", "t3st", shortWait)
		return err
	})
	wantIn(t, err, "namespace cnibench is still terminating after 30ms")
}

func TestWaitPodsGoneTimeout(t *testing.T) {
	r := &Runner{Client: fake.NewSimpleClientset(pendingPod("cnibench", "cnb-t3st-a")), Poll: time.Millisecond}
	// Only the cleanup's context bounds this wait.
	ctx, cancel := context.WithTimeout(context.Background(), shortWait)
	defer cancel()
	err := timedOut(t, func() error { return r.waitPodsGone(ctx, "cnibench", RunSelector("t3st")) })
	wantIn(t, err, "1 pod(s) still terminating, e.g. cnb-t3st-a")
}

func TestCleanNamespacesTimeout(t *testing.T) {
	cs := fake.NewSimpleClientset(NamespaceSpec("cnibench", "t3st"))
	// A namespace that stays (terminating) after its delete is accepted.
	cs.PrependReactor("delete", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	err := timedOut(t, func() error {
		_, err := Clean(context.Background(), cs, shortWait, time.Millisecond)
		return err
	})
	wantIn(t, err, "namespaces still terminating after 30ms: cnibench")
}

func TestAuditTimeout(t *testing.T) {
	// No DaemonSet controller: not one audit pod starts.
	r := &Runner{Client: fake.NewSimpleClientset(), Poll: time.Millisecond, RunID: "t3st"}
	err := timedOut(t, func() error {
		_, err := r.Audit(context.Background(), AuditOptions{Image: "x:1", Timeout: shortWait})
		return err
	})
	wantIn(t, err, "daemonset "+AuditDaemonSet(PodOptions{RunID: "t3st"}, nil).Name+" started no pod within 30ms")

	// A node whose audit is still running when the time is up is reported
	// as such; the others are read.
	fc := newFakeCluster(t, "n1", "n2")
	fc.serverState = func(p *corev1.Pod) {
		if p.Spec.NodeName == "n2" {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: auditContainer,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}
	}
	fc.logs = func(*corev1.Pod, string) ([]byte, error) {
		return []byte(`[{"knob":"somaxconn","current":"4096","recommended":"4096","status":"ok"}]`), nil
	}
	t0 := time.Now()
	audits, err := fc.runner().Audit(context.Background(), AuditOptions{Image: "x:1", Timeout: shortWait})
	if err != nil || time.Since(t0) < shortWait {
		t.Fatalf("after %v: %v", time.Since(t0), err)
	}
	if len(audits) != 2 || audits[0].Error != "" || !strings.HasPrefix(audits[1].Error, "not finished after 30ms: ") {
		t.Errorf("audits: %+v", audits)
	}
}
