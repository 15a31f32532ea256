package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cnibench/cnibench/internal/storetest"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// fakeDatapath plays the nodes' datapath and the latency pods for a fake
// cluster: each node sees a created or deleted Service or policy after its
// own delay (never, when negative), and the agent pods' logs are the edges
// a real agent would print, computed when the log is read.
type fakeDatapath struct {
	mu     sync.Mutex
	delay  map[string]time.Duration // by node
	events []dpEvent
	// creates counts the trial objects created, by kind (service, pol).
	creates map[string]int
	// failCreate, if set, fails a create of that kind's n-th object.
	failCreate func(kind string, n int) error
	// onCreate, if set, runs after every trial object's create.
	onCreate func(kind string, n int)
	// proxy, if set, is what node's kube-proxy does after Service trial
	// n's create (its watcher's log); proxyDown: no kube-proxy answers.
	proxy     func(node string, trial int, created time.Time) []proxyEvent
	proxyDown bool
	// noDeleteSync: kube-proxy never syncs a Service's delete.
	noDeleteSync bool
}

// proxyEvent is one sync of a fake kube-proxy, ending at at.
type proxyEvent struct {
	at   time.Time
	full bool
}

type dpEvent struct {
	at   time.Time
	kind string // service, deny, allow
	name string
	add  bool
}

func newFakeDatapath(fc *fakeCluster, delay map[string]time.Duration) *fakeDatapath {
	dp := &fakeDatapath{delay: delay, creates: map[string]int{}}
	note := func(kind string, add bool) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			var name string
			var labels map[string]string
			switch a := a.(type) {
			case k8stesting.CreateAction:
				m, _ := a.GetObject().(metav1.Object)
				name, labels = m.GetName(), m.GetLabels()
			case k8stesting.DeleteAction:
				name = a.GetName()
			}
			if add && labels[LabelRole] != roleLatencyObject {
				return false, nil, nil
			}
			k := kind
			if kind == "policy" {
				k = "allow"
				if strings.Contains(name, "-lat-deny-") {
					k = "deny"
				}
			}
			dp.mu.Lock()
			defer dp.mu.Unlock()
			if add {
				dp.creates[kind]++
				if dp.failCreate != nil {
					if err := dp.failCreate(kind, dp.creates[kind]); err != nil {
						return true, nil, err
					}
				}
			}
			dp.events = append(dp.events, dpEvent{at: time.Now(), kind: k, name: name, add: add})
			if add && dp.onCreate != nil {
				n := dp.creates[kind]
				defer func() { go dp.onCreate(kind, n) }()
			}
			return false, nil, nil
		}
	}
	fc.cs.PrependReactor("create", "services", note("service", true))
	fc.cs.PrependReactor("delete", "services", note("service", false))
	fc.cs.PrependReactor("create", "networkpolicies", note("policy", true))
	fc.cs.PrependReactor("delete", "networkpolicies", note("policy", false))
	// The latency pods' "kubelet": agents and the target run and are
	// Ready, a new pod has run to completion.
	fc.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		pod.CreationTimestamp = metav1.NewTime(time.Now())
		switch pod.Labels[LabelRole] {
		case roleLatencyAgent, roleLatencyTarget, roleLatencyProxy:
			pod.Status.Phase = corev1.PodRunning
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		case roleLatencyPod:
			pod.Status.Phase = corev1.PodSucceeded
		}
		return false, nil, nil
	})
	fc.logs = dp.log
	return dp
}

func argValues(args []string, flag string) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			out = append(out, args[i+1])
		}
	}
	return out
}

// log is what a latency pod has printed by now.
func (dp *fakeDatapath) log(pod *corev1.Pod, _ string) ([]byte, error) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	args := pod.Spec.Containers[0].Args
	now := time.Now()
	switch pod.Labels[LabelRole] {
	case roleLatencyProxy:
		dp.proxyLog(enc, pod, now)
	case roleLatencyPod:
		// Every agent answers the new pod after its node's delay.
		for _, t := range argValues(args, "--target") {
			node, _, _ := strings.Cut(t, "=")
			if d := dp.delay[node]; d >= 0 {
				_ = enc.Encode(Edge{Target: node, OK: true, At: pod.CreationTimestamp.Add(d).UnixNano()})
			}
		}
	case roleLatencyAgent:
		node := pinnedNode(pod)
		d := dp.delay[node]
		for _, t := range argValues(args, "--target") {
			name, _, _ := strings.Cut(t, "=")
			born := pod.CreationTimestamp.Time
			svc, deny, allow := false, map[string]bool{}, map[string]bool{}
			state := func() bool {
				if name == targetService {
					return svc
				}
				return len(deny) == 0 || len(allow) > 0
			}
			cur := state()
			_ = enc.Encode(Edge{Target: name, OK: cur, At: born.UnixNano()})
			for _, e := range dp.events {
				if e.at.Before(born) {
					continue
				}
				switch e.kind {
				case "service":
					svc = e.add
				case "deny":
					deny[e.name] = e.add
					if !e.add {
						delete(deny, e.name)
					}
				case "allow":
					allow[e.name] = e.add
					if !e.add {
						delete(allow, e.name)
					}
				}
				seen := e.at.Add(d)
				if s := state(); s != cur && d >= 0 && !seen.After(now) {
					cur = s
					_ = enc.Encode(Edge{Target: name, OK: s, At: seen.UnixNano(), Prev: seen.Add(-time.Millisecond).UnixNano()})
				}
			}
		}
	}
	return []byte(b.String()), nil
}

// proxyLog is what a kube-proxy watcher has printed by now: a read when
// it started, one after each sync of dp.proxy, and one now.
func (dp *fakeDatapath) proxyLog(enc *json.Encoder, pod *corev1.Pod, now time.Time) {
	born := pod.CreationTimestamp.Time
	if dp.proxyDown {
		for _, at := range []time.Time{born, now} {
			_ = enc.Encode(KubeProxySnapshot{At: at.UnixNano(), Err: "no kube-proxy metrics on 127.0.0.1:10249: connect: connection refused"})
		}
		return
	}
	s := KubeProxySnapshot{At: born.UnixNano(), Full: 1, FullSum: 1, LastSync: float64(born.Add(-time.Second).UnixNano()) / 1e9}
	_ = enc.Encode(s)
	trial := -1 // the first create reserves the ClusterIP
	for _, e := range dp.events {
		if e.kind != "service" {
			continue
		}
		if !e.add {
			// A real kube-proxy syncs each delete; here 5 ms after it
			// (waitProxySynced waits for that sync before a trial).
			at := e.at.Add(5 * time.Millisecond)
			if read := at.Add(time.Millisecond); !dp.noDeleteSync && !e.at.Before(born) && !read.After(now) {
				s.Partial, s.PartialSum = s.Partial+1, s.PartialSum+0.001
				s.At, s.LastSync = read.UnixNano(), float64(at.UnixNano())/1e9
				_ = enc.Encode(s)
			}
			continue
		}
		if trial++; trial == 0 || dp.proxy == nil || e.at.Before(born) {
			continue
		}
		for _, ev := range dp.proxy(pinnedNode(pod), trial, e.at) {
			if read := ev.at.Add(time.Millisecond); !read.After(now) {
				if ev.full {
					s.Full, s.FullSum = s.Full+1, s.FullSum+0.005
				} else {
					s.Partial, s.PartialSum = s.Partial+1, s.PartialSum+0.001
				}
				s.At, s.LastSync = read.UnixNano(), float64(ev.at.UnixNano())/1e9
				_ = enc.Encode(s)
			}
		}
	}
	s.At = now.UnixNano()
	_ = enc.Encode(s)
}

func latencyTestOptions(kinds ...string) LatencyOptions {
	return LatencyOptions{Namespace: "cnibench", Image: "cnibench:test", Kinds: kinds, Trials: 3,
		TrialTimeout: 300 * time.Millisecond, ReadyTimeout: time.Second}
}

// runLatency runs a latency run on the fake cluster, storing into a real
// results database.
func runLatency(t *testing.T, ctx context.Context, fc *fakeCluster, o LatencyOptions) ([]Trial, *store.DB, Recorded, error) {
	t.Helper()
	r := fc.runner()
	cl, nodes, err := Fingerprint(ctx, fc.api)
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.Open(t)
	trials, rec, err := r.RecordLatency(ctx, cl, nodes, o, store.Recorder{DB: db}, "test", "# cnibench k8s latency\n")
	return trials, db, rec, err
}

func TestLatencyServiceAndPodTrials(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	dp := newFakeDatapath(fc, map[string]time.Duration{"n1": 10 * time.Millisecond, "n2": 40 * time.Millisecond})
	// Trial 2's first create finds the ClusterIP not yet released: it is
	// tried again, and counts from the create that succeeded.
	dp.failCreate = func(kind string, n int) error {
		if kind == "service" && n == 3 {
			return apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "cnb-t3st-lat-svc", field.ErrorList{
				field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), "10.96.0.42", "failed to allocate IP 10.96.0.42: provided IP is already allocated")})
		}
		return nil
	}
	o := latencyTestOptions(LatencyService, LatencyPod)
	o.Services = 30
	trials, db, rec, err := runLatency(t, context.Background(), fc, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) != 6 {
		t.Fatalf("%d trials, want 3 service + 3 pod", len(trials))
	}
	for _, tr := range trials {
		if tr.LatencyNs == nil || len(tr.Nodes) != 2 {
			t.Fatalf("trial %+v: want a latency from both nodes", tr)
		}
		// n2 is the slow node; the latency is counted from the answer,
		// so it is at most n2's delay and not by much less.
		if l := time.Duration(*tr.LatencyNs); l > 40*time.Millisecond || l < 30*time.Millisecond {
			t.Errorf("%s trial %d: %s, want n2's 40ms (the max over nodes), counted from the API's answer", tr.Test, tr.N, l)
		}
		if tr.CreatedAt.Before(tr.SentAt) {
			t.Errorf("answer %v before the request %v", tr.CreatedAt, tr.SentAt)
		}
	}
	// The pod trials went to each node in turn.
	if trials[3].Node != "n1" || trials[4].Node != "n2" || trials[5].Node != "n1" {
		t.Errorf("pod trials on %s, %s, %s", trials[3].Node, trials[4].Node, trials[5].Node)
	}
	// The agents probed the reserved ClusterIP from before the first
	// trial, and the fillers were there.
	var agents int
	for _, p := range fc.createdPods() {
		if p.Labels[LabelRole] == roleLatencyAgent && strings.Contains(strings.Join(p.Spec.Containers[0].Args, " "), "svc=10.96.0.42:7421") {
			agents++
		}
	}
	if agents != 2 {
		t.Errorf("%d service agents probing the ClusterIP, want one per node", agents)
	}
	if dp.creates["service"] != 5 {
		t.Errorf("%d Service creates, want the reservation, 3 trials and one retry", dp.creates["service"])
	}
	fc.wantClean(t)
	// Stored: one sample per trial, the run complete; compare reads it.
	run, err := db.GetRun(rec.Name)
	if err != nil {
		t.Fatal(err)
	}
	samples, _ := db.Samples(run.ID)
	if len(samples) != 6 || !run.Complete || run.Kind != KindK8sLatency || run.Labels["k8s.services"] != "30" {
		t.Errorf("stored %d samples, complete %v, kind %s, labels %v", len(samples), run.Complete, run.Kind, run.Labels)
	}
	rows, _, _ := report.Comparison(run, samples, run, samples)
	if len(rows) != 2 || rows[0].Test != result.SvcLatency || rows[0].Verdict == nil {
		t.Errorf("compare of the run with itself: %+v", rows)
	}
	// `cnibench report` and `compare` print it as any run.
	var rep, cmp strings.Builder
	if err := report.RenderStored(&rep, report.FormatTable, db, rec.Name); err != nil || !strings.Contains(rep.String(), "svc_latency (ms)") {
		t.Errorf("report: %v\n%s", err, rep.String())
	}
	if err := report.CompareFormat(&cmp, report.FormatTable, run, samples, run, samples); err != nil || !strings.Contains(cmp.String(), "pod_ready_latency") {
		t.Errorf("compare: %v\n%s", err, cmp.String())
	}
}

// A node that never sees the Service fails every trial: a failure with
// the node named, stored as a failed sample, never a latency; and the run
// still removes everything.
func TestLatencyTimeoutIsFailureNotLatency(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	newFakeDatapath(fc, map[string]time.Duration{"n1": 5 * time.Millisecond, "n2": -1})
	trials, db, rec, err := runLatency(t, context.Background(), fc, latencyTestOptions(LatencyService))
	if err == nil || !strings.Contains(err.Error(), "trials failed") {
		t.Fatalf("err = %v; want the failed trials counted", err)
	}
	if len(trials) == 0 {
		t.Fatal("no trial")
	}
	for _, tr := range trials {
		if tr.LatencyNs != nil || !strings.Contains(tr.Error, "n2") {
			t.Errorf("trial %+v: want no latency and n2 named", tr)
		}
	}
	run, _ := db.GetRun(rec.Name)
	samples, _ := db.Samples(run.ID)
	for _, s := range samples {
		if s.Result != nil || s.Error == "" {
			t.Errorf("sample %+v: want a failure", s)
		}
	}
	if run.Complete {
		t.Error("a run with failed trials stored as complete")
	}
	fc.wantClean(t)
}

// NetworkPolicy on a CNI that does not enforce it is missing with the
// reason, never a number; on Cilium it is measured, deny then allow.
func TestLatencyPolicyMissingOrMeasured(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	newFakeDatapath(fc, map[string]time.Duration{"n1": 5 * time.Millisecond, "n2": 15 * time.Millisecond})
	trials, _, _, err := runLatency(t, context.Background(), fc, latencyTestOptions(LatencyPolicy))
	if err != nil {
		t.Fatal(err)
	}
	sums := SummarizeLatency(trials)
	if len(sums) != 2 || sums[0].MedianMs != nil || !strings.Contains(sums[0].Missing, "bridge") || !strings.Contains(sums[0].Missing, "does not enforce") {
		t.Errorf("on the bridge plugin: %+v, want both policy tests missing with the reason", sums)
	}
	fc.wantClean(t)

	fc = newFakeCluster(t, "n1", "n2")
	p := ciliumProbe("", "iptables", false, bptr(false), "1.20.2")
	fc.probe = &p
	newFakeDatapath(fc, map[string]time.Duration{"n1": 5 * time.Millisecond, "n2": 15 * time.Millisecond})
	trials, _, _, err = runLatency(t, context.Background(), fc, latencyTestOptions(LatencyPolicy))
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	for _, tr := range trials {
		tests = append(tests, tr.Test)
		if tr.LatencyNs == nil || time.Duration(*tr.LatencyNs) > 15*time.Millisecond {
			t.Errorf("%s trial %d: %+v, want n2's 15ms at most", tr.Test, tr.N, tr)
		}
	}
	if want := strings.Repeat(result.NetpolDenyLatency+","+result.NetpolAllowLatency+",", 3); strings.Join(tests, ",")+"," != want {
		t.Errorf("trials %v, want deny then allow per trial", tests)
	}
	var pols []string
	for _, a := range fc.api.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "networkpolicies" {
			pol := c.GetObject().(*networkingv1.NetworkPolicy)
			pols = append(pols, fmt.Sprintf("%s:%d", pol.Name[strings.LastIndex(pol.Name, "-lat-")+5:], len(pol.Spec.Ingress)))
		}
	}
	if strings.Join(pols, " ") != "deny-1:0 allow-1:1 deny-2:0 allow-2:1 deny-3:0 allow-3:1" {
		t.Errorf("policies created: %v", pols)
	}
	fc.wantClean(t)
}

// Every object goes, by run id, when a create fails half way and when the
// run is cancelled in the middle of a trial.
func TestLatencyCleanupOnFailureAndCancel(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	dp := newFakeDatapath(fc, map[string]time.Duration{"n1": 5 * time.Millisecond, "n2": 5 * time.Millisecond})
	dp.failCreate = func(kind string, n int) error {
		if kind == "service" && n == 3 { // the reservation, trial 1, then this
			return errors.New("etcdserver: request timed out")
		}
		return nil
	}
	o := latencyTestOptions(LatencyService)
	o.Services = 10
	trials, _, _, err := runLatency(t, context.Background(), fc, o)
	if err == nil || !strings.Contains(err.Error(), "request timed out") || len(trials) != 1 {
		t.Fatalf("err = %v after %d trials; want the create error after one trial", err, len(trials))
	}
	fc.wantClean(t)

	fc = newFakeCluster(t, "n1", "n2")
	dp = newFakeDatapath(fc, map[string]time.Duration{"n1": 5 * time.Millisecond, "n2": -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dp.onCreate = func(kind string, n int) {
		if kind == "service" && n == 2 { // trial 1 is waiting for n2
			time.Sleep(20 * time.Millisecond)
			cancel()
		}
	}
	o.TrialTimeout = 10 * time.Second
	_, _, _, err = runLatency(t, ctx, fc, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the cancellation", err)
	}
	fc.wantClean(t)
}
