package k8s

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cnibench/cnibench/pkg/result"
)

// The second half of Execute: the client pods, one per step, and what each
// measured (setup.go is the first half).

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

// measureSteps is the second half of Execute: the plan's client pods, one
// at a time in its order, each outcome (with the agents' CPU folded in)
// logged and handed to onSample. A failed pod is a failed sample and the
// run goes on; the error then counts the failures.
func (r *Runner) measureSteps(ctx context.Context, plan *Plan, o Options, po PodOptions, set *runSetup, onSample func(Sample) error) error {
	failed, total := 0, 0
	var firstFail string
	for i, st := range plan.Steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted after %d of %d client pods: %w", i, len(plan.Steps), err)
		}
		var s Sample
		if st.Hairpin {
			s = r.measureHairpin(ctx, po, o, st)
		} else {
			s = r.measure(ctx, po, o, st, set.targets[targetKey(st.Scenario, st.Engine)])
		}
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted after %d of %d client pods: %w", i, len(plan.Steps), ctx.Err())
		}
		s.Seq = i + 1
		plan.Cluster.stampDatapath(&s)
		if set.meters != nil && s.Error == "" {
			set.meters.fold(ctx, r, po.Namespace, &s)
		}
		total++
		if s.Error != "" {
			failed++
			if firstFail == "" {
				firstFail = s.Pod + ": " + s.Error
			}
			fmt.Fprintf(o.Log, "[%d/%d] %s repeat %d: FAILED: %s\n", s.Seq, len(plan.Steps), st.armName(), st.Repeat, s.Error)
		} else {
			fmt.Fprintf(o.Log, "[%d/%d] %s repeat %d: %d result(s)%s\n", s.Seq, len(plan.Steps), st.armName(), st.Repeat, len(s.Results), brief(s.Results))
		}
		if onSample != nil {
			if err := onSample(s); err != nil {
				return err
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d client pods failed; first: %s", failed, total, firstFail)
	}
	return nil
}

// stampDatapath writes, into each result's client and server fingerprint,
// the pod network of the node that side ran on as its probe found it
// (notes "datapath" and "kube_proxy"), so every stored sample says what
// carried it, also when it is read apart from its run.
func (c *Cluster) stampDatapath(s *Sample) {
	byNode := map[string]NodeProbe{}
	for _, p := range c.Probes {
		byNode[p.Node] = p
	}
	stamp := func(side **result.Fingerprint, node string) {
		p, ok := byNode[node]
		if !ok || p.Error != "" {
			return
		}
		if *side == nil {
			// A reference tool reports no fingerprint of its own.
			*side = &result.Fingerprint{Hostname: node}
		}
		fp := *side
		if fp.Notes == nil {
			fp.Notes = map[string]string{}
		}
		fp.Notes["node"] = node
		fp.Notes["datapath"] = probedDatapath(p).Summary()
		kp := p.KubeProxyMode
		if kp == "" {
			kp = "none answering"
		}
		fp.Notes["kube_proxy"] = kp
	}
	for _, r := range s.Results {
		stamp(&r.Env.Client, s.ClientNode)
		stamp(&r.Env.Server, s.ServerNode)
	}
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
