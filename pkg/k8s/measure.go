package k8s

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cnibench/cnibench/pkg/result"
)

// Sample is the outcome of one client pod.
type Sample struct {
	Seq int `json:"seq"`
	Step
	Pod     string           `json:"pod"`
	Target  string           `json:"target"`
	Results []*result.Result `json:"results,omitempty"`
	// Profiles are the client's window profiles (--profile), one per result.
	Profiles []*result.WindowProfile `json:"profiles,omitempty"`
	// Error says why this pod gave no results; "" when it did.
	Error string `json:"error,omitempty"`
}

// brief shows the primary figure of the first result, so the progress log
// says at a glance that numbers are coming back.
func brief(rs []*result.Result) string {
	if len(rs) == 0 {
		return ""
	}
	m := result.PrimaryMetric(rs[0].Test)
	if v, ok := m.Get(rs[0]); ok {
		return fmt.Sprintf(" (%s %dB: %.4g %s)", rs[0].Test, rs[0].MsgSizeBytes, v, m.Unit)
	}
	return ""
}

// measureHairpin runs one hairpin repeat: its Service, then its pod.
func (r *Runner) measureHairpin(ctx context.Context, po PodOptions, o Options, st Step) Sample {
	ip, del, err := r.hairpinTarget(ctx, po, st.Repeat)
	if err != nil {
		return Sample{Step: st, Pod: ClientName(po.RunID, st.Scenario, st.Repeat), Error: err.Error()}
	}
	defer del()
	return r.measure(ctx, po, o, st, ip)
}

// measure runs one client pod to completion and reads its results.
func (r *Runner) measure(ctx context.Context, po PodOptions, o Options, st Step, target string) Sample {
	s := Sample{Step: st, Target: target}
	// The API rejects a deadline of 0; a sub-second budget still gets one.
	deadline := max(1, int64(o.MeasureTimeout.Seconds()))
	pod := ClientPod(po.forEngine(st.Engine), st.Placement, st.Repeat, target, o.clientArgs(st.Engine), deadline)
	if st.Hairpin {
		// The wait for the ClusterIP happens before the pod counts as
		// started, so it shares the ready timeout. Its server is the
		// built-in engine's (engineSkip keeps the tools off hairpin).
		pod = HairpinPod(po, st.Placement, st.Repeat, target, o.clientArgs(st.Engine), deadline+int64(o.ReadyTimeout.Seconds()), o.ReadyTimeout)
	}
	s.Pod = pod.Name
	cs := r.Client
	if _, err := cs.CoreV1().Pods(po.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		s.Error = APIError("create", "client pod", err).Error()
		return s
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = cs.CoreV1().Pods(po.Namespace).Delete(dctx, pod.Name, metav1.DeleteOptions{})
	}()
	// Two stages, so an image or scheduling problem is reported after the
	// ready timeout rather than after the much longer measurement timeout.
	if _, err := r.waitPod(ctx, po.Namespace, pod.Name, o.ReadyTimeout, podStarted); err != nil {
		s.Error = err.Error()
		return s
	}
	done, err := r.waitPod(ctx, po.Namespace, pod.Name, o.MeasureTimeout, podFinished)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	logs, lerr := r.logs(ctx, po.Namespace, pod.Name, containerName)
	if done.Status.Phase == corev1.PodFailed {
		msg := Explain(done, nil)
		if lerr == nil && len(logs) > 0 {
			msg += "; log: " + lastLine(logs)
		}
		s.Error = oneLine(msg)
		return s
	}
	if lerr != nil {
		s.Error = APIError("read", "log of "+pod.Name, lerr).Error()
		return s
	}
	set, err := ParseClientLog(logs)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	if len(set.Results) == 0 {
		s.Error = "the client printed a result set with no results"
		return s
	}
	s.Results = set.Results
	s.Profiles = set.Profiles
	return s
}
