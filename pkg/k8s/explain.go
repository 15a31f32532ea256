package k8s

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cnibench/cnibench/pkg/result"
)

// imageErrors are container waiting reasons that will not fix themselves
// by waiting: the image is not on the node and cannot be fetched.
var imageErrors = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true,
	"InvalidImageName": true, "ImageInspectError": true, "RegistryUnavailable": true,
}

// fatalWaiting are waiting reasons that make waiting pointless.
var fatalWaiting = map[string]bool{
	"CreateContainerConfigError": true, "CreateContainerError": true, "CrashLoopBackOff": true,
	"RunContainerError": true,
}

// Explain says in one line why a pod is not where it should be, from its
// status and its events: image pull errors first (the usual cause with a
// locally built image), then scheduling, then crashes, then the latest
// warning event.
func Explain(pod *corev1.Pod, events []corev1.Event) string {
	var statuses []corev1.ContainerStatus
	statuses = append(statuses, pod.Status.InitContainerStatuses...)
	statuses = append(statuses, pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && imageErrors[w.Reason] {
			return oneLine(fmt.Sprintf("image pull error on node %s: %s: %s (load the image on every node, e.g. `k8slab import`, or set --image / --image-pull-policy)",
				orUnknown(pod.Spec.NodeName), w.Reason, w.Message))
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return oneLine(fmt.Sprintf("unschedulable: %s", firstNonEmpty(c.Message, c.Reason)))
		}
	}
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return oneLine(fmt.Sprintf("container %s exited with code %d (%s)%s", cs.Name, t.ExitCode, t.Reason, suffix(t.Message)))
		}
		if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
			return oneLine(fmt.Sprintf("container %s keeps exiting, last with code %d (%s)%s", cs.Name, t.ExitCode, t.Reason, suffix(t.Message)))
		}
		if w := cs.State.Waiting; w != nil && fatalWaiting[w.Reason] {
			return oneLine(fmt.Sprintf("container %s: %s%s", cs.Name, w.Reason, suffix(w.Message)))
		}
	}
	if pod.Status.Reason != "" {
		return oneLine(fmt.Sprintf("pod %s%s", pod.Status.Reason, suffix(pod.Status.Message)))
	}
	if e := latestWarning(pod.Name, events); e != nil {
		return oneLine(fmt.Sprintf("%s: %s", e.Reason, e.Message))
	}
	phase := string(pod.Status.Phase)
	if phase == "" {
		phase = "Pending"
	}
	return fmt.Sprintf("pod is %s with no warning events", phase)
}

// latestWarning is the most recent Warning event about the named pod.
func latestWarning(pod string, events []corev1.Event) *corev1.Event {
	var ws []corev1.Event
	for _, e := range events {
		if e.InvolvedObject.Name == pod && e.Type == corev1.EventTypeWarning {
			ws = append(ws, e)
		}
	}
	if len(ws) == 0 {
		return nil
	}
	sort.SliceStable(ws, func(i, j int) bool { return eventTime(ws[i]).Before(eventTime(ws[j])) })
	return &ws[len(ws)-1]
}

// eventTime is when the event last happened; the fields an API server fills
// differ between the events.k8s.io and core/v1 writers.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// retried reports a waiting state the kubelet gets out of by itself: a
// container whose Secret or ConfigMap the kubelet had not cached yet
// ("failed to sync secret cache: timed out waiting for the condition",
// seen right after the run's token Secret was created on a loaded node).
// A Secret that does not exist says "not found" and stays hopeless.
func retried(w *corev1.ContainerStateWaiting) bool {
	return w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "failed to sync")
}

// hopeless reports whether a pod can no longer become Ready or finish, so
// the wait can stop before its timeout.
func hopeless(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil && (imageErrors[w.Reason] || fatalWaiting[w.Reason]) && !retried(w) {
				return true
			}
		}
	}
	return false
}

// APIError turns an API failure into one line a user can act on; RBAC
// denials name the verb and resource cnibench needed.
func APIError(verb, what string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("RBAC denied: cannot %s %s (%v); cnibench needs create/get/list/watch/delete on namespaces, pods, pods/log, services, events and daemonsets", verb, what, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("cannot %s %s: unauthorized: the kubeconfig's credentials were rejected (%v)", verb, what, err)
	}
	return fmt.Errorf("%s %s: %w", verb, what, err)
}

// ErrNoResult is wrapped when a client's log holds no result document.
var ErrNoResult = errors.New("no result JSON in the client's log")

// ParseClientLog finds the result.Set that `cnibench client --json` printed.
// A pod's log merges stdout and stderr, so the document may sit among
// progress or warning lines: every line that starts with '{' is tried as
// the start of a JSON document, and the last that decodes as a Set wins.
func ParseClientLog(b []byte) (*result.Set, error) {
	var found *result.Set
	var lastErr error
	for i := 0; i < len(b); i++ {
		if b[i] != '{' || (i > 0 && b[i-1] != '\n') {
			continue
		}
		var raw json.RawMessage
		if err := json.NewDecoder(bytes.NewReader(b[i:])).Decode(&raw); err != nil {
			continue
		}
		if !bytes.Contains(raw[:min(len(raw), 200)], []byte(`"schema"`)) {
			continue
		}
		s, err := result.DecodeSet(raw)
		if err != nil {
			lastErr = err
			continue
		}
		found = s
		i += len(raw) - 1
	}
	if found != nil {
		return found, nil
	}
	if lastErr != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoResult, lastErr)
	}
	return nil, fmt.Errorf("%w; last line: %q", ErrNoResult, lastLine(b))
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	l := lines[len(lines)-1]
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return l
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "(not yet scheduled)"
	}
	return s
}
