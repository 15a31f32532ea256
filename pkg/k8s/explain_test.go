package k8s

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func event(pod, typ, reason, msg string, at time.Time) corev1.Event {
	return corev1.Event{InvolvedObject: corev1.ObjectReference{Name: pod}, Type: typ, Reason: reason, Message: msg,
		LastTimestamp: metav1.NewTime(at)}
}

func TestExplain(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Phase: corev1.PodPending}}
	}
	imagePull := base()
	imagePull.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "ErrImageNeverPull", Message: "Container image \"x:1\" is not present\nwith pull policy of Never"}}}}
	unsched := base()
	unsched.Spec.NodeName = ""
	unsched.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/2 nodes are available: 1 node(s) had untolerated taint."}}
	crash := base()
	crash.Status.Phase = corev1.PodRunning
	crash.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}}}
	evicted := base()
	evicted.Status.Phase, evicted.Status.Reason, evicted.Status.Message = corev1.PodFailed, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
	quiet := base()

	evs := []corev1.Event{
		event("p", corev1.EventTypeWarning, "FailedMount", "old", t0),
		event("p", corev1.EventTypeWarning, "FailedCreatePodSandBox", "failed to setup network for sandbox: plugin type=\"bridge\" failed", t0.Add(time.Minute)),
		event("p", corev1.EventTypeNormal, "Pulled", "newest but normal", t0.Add(2*time.Minute)),
		event("other", corev1.EventTypeWarning, "BackOff", "another pod", t0.Add(3*time.Minute)),
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		evs  []corev1.Event
		want string
	}{
		{"image", imagePull, evs, "image pull error on node n1: ErrImageNeverPull: Container image \"x:1\" is not present; with pull policy of Never"},
		{"unschedulable", unsched, evs, "unschedulable: 0/2 nodes are available: 1 node(s) had untolerated taint."},
		{"crash", crash, nil, "container c keeps exiting, last with code 2 (Error)"},
		{"deadline", evicted, nil, "pod DeadlineExceeded: Pod was active"},
		{"latest warning event", quiet, evs, "FailedCreatePodSandBox: failed to setup network"},
		{"nothing", quiet, nil, "pod is Pending with no warning events"},
	} {
		got := Explain(tc.pod, tc.evs)
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s:\n got %s\nwant %s…", tc.name, got, tc.want)
		}
		if strings.Contains(got, "\n") {
			t.Errorf("%s: not one line: %q", tc.name, got)
		}
	}
	if !hopeless(imagePull) || !hopeless(crash) || hopeless(unsched) || hopeless(quiet) {
		t.Error("hopeless() misjudges")
	}
	// The kubelet retries a Secret it has not cached yet; a missing one
	// stays missing.
	config := func(msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "cnibench",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: msg}}}}}}
	}
	if hopeless(config("failed to sync secret cache: timed out waiting for the condition")) {
		t.Error("a secret cache still syncing judged hopeless")
	}
	if !hopeless(config(`secret "cnb-x-token" not found`)) {
		t.Error("a missing secret judged worth waiting for")
	}
}

func TestAPIError(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", errors.New("no"))
	if err := APIError("create", "server pod", forbidden); !strings.HasPrefix(err.Error(), "RBAC denied: cannot create server pod") {
		t.Errorf("forbidden: %v", err)
	}
	if err := APIError("list", "nodes", apierrors.NewUnauthorized("bad cert")); !strings.Contains(err.Error(), "credentials were rejected") {
		t.Errorf("unauthorized: %v", err)
	}
	other := errors.New("boom")
	if err := APIError("get", "pod p", other); !errors.Is(err, other) {
		t.Errorf("other errors must stay wrapped: %v", err)
	}
}

const oneResult = `{"schema":"cnibench.results/v1","results":[{"schema":"cnibench.result/v1","tool":{"name":"cnibench","version":"x"},"test":"tcp_lat","msg_size_bytes":1,"parallel":1,"server":"1.2.3.4:7420","start":"2026-01-01T00:00:00Z","duration_seconds":1,"warmup_seconds":0,"env":{}}]}`

func TestParseClientLog(t *testing.T) {
	pretty := strings.ReplaceAll(oneResult, `,"results"`, ",\n  \"results\"")
	for name, in := range map[string]string{
		"bare":          oneResult,
		"noise":         "cnibench: warming up\n{not json\n" + oneResult + "\n" + "cnibench: done\n",
		"pretty":        "progress {x}\n" + pretty + "\n",
		"stderr braces": "{\"level\":\"info\"}\n" + oneResult,
	} {
		s, err := ParseClientLog([]byte(in))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(s.Results) != 1 || s.Results[0].Test != "tcp_lat" {
			t.Errorf("%s: %+v", name, s)
		}
	}
	_, err := ParseClientLog([]byte("cnibench: dial tcp 10.0.0.1:7420: connect: no route to host\n"))
	if !errors.Is(err, ErrNoResult) || !strings.Contains(err.Error(), "no route to host") {
		t.Errorf("no JSON: %v", err)
	}
	_, err = ParseClientLog([]byte(strings.Replace(oneResult, "cnibench.result/v1", "cnibench.result/v9", 1)))
	if !errors.Is(err, ErrNoResult) || !strings.Contains(err.Error(), "schema") {
		t.Errorf("wrong schema: %v", err)
	}
}

func TestParseAudit(t *testing.T) {
	fs, err := ParseAudit([]byte("warning: x\n[\n  {\"knob\": \"somaxconn\", \"current\": \"4096\", \"status\": \"ok\"}\n]\n"))
	if err != nil || len(fs) != 1 || fs[0].Knob != "somaxconn" || fs[0].Current != "4096" {
		t.Errorf("%+v %v", fs, err)
	}
	if _, err := ParseAudit([]byte("cnibench: unknown command \"tune\"\n")); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("%v", err)
	}
}
