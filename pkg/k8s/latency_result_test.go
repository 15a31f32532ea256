package k8s

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
)

var t0 = time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC)

func at(d time.Duration) int64 { return t0.Add(d).UnixNano() }

func TestLatencyTrialMaxOverNodes(t *testing.T) {
	sent, created := t0, t0.Add(2*time.Millisecond)
	byNode := map[string][]Edge{
		// n1: failing since before the send, success at +40ms.
		"n1": {{Target: "svc", OK: false, At: at(-time.Second)}, {Target: "svc", OK: true, At: at(40 * time.Millisecond), Prev: at(35 * time.Millisecond)}},
		// n2: an old success before the send is not this trial's; it
		// fails again after the send, then succeeds at +90ms.
		"n2": {{Target: "svc", OK: true, At: at(-time.Minute)}, {Target: "svc", OK: false, At: at(-time.Second)},
			{Target: "svc", OK: true, At: at(90 * time.Millisecond), Prev: at(85 * time.Millisecond)}},
	}
	tr := LatencyTrial(result.SvcLatency, 3, []string{"n1", "n2"}, byNode, true, sent, created)
	if tr.Error != "" || tr.LatencyNs == nil {
		t.Fatalf("trial failed: %+v", tr)
	}
	if got, want := *tr.LatencyNs, float64(88*time.Millisecond); got != want {
		t.Errorf("latency %v, want the slowest node's, %v", got, want)
	}
	if *tr.Nodes[0].LatencyNs != float64(38*time.Millisecond) || *tr.Nodes[0].ResolutionNs != float64(5*time.Millisecond) {
		t.Errorf("n1: %+v", tr.Nodes[0])
	}
	if tr.N != 3 || tr.CreatedAt != created || tr.SentAt != sent {
		t.Errorf("bookkeeping: %+v", tr)
	}

	// A success already there at the first attempt after the send (the
	// probe started late): the resolution is the whole wait since the
	// answer, not the prober's interval.
	byNode = map[string][]Edge{"n1": {{Target: "svc", OK: true, At: at(30 * time.Millisecond)}}}
	tr = LatencyTrial(result.SvcLatency, 1, []string{"n1"}, byNode, true, sent, created)
	if *tr.Nodes[0].ResolutionNs != float64(28*time.Millisecond) {
		t.Errorf("resolution %v, want since the answer (28ms)", *tr.Nodes[0].ResolutionNs)
	}
}

// Every node saw the Service after the request left but before its answer
// arrived: the trial's latency is the slowest node's, negative, not 0.
func TestLatencyTrialAllNegative(t *testing.T) {
	sent, created := t0, t0.Add(100*time.Millisecond)
	byNode := map[string][]Edge{
		"n1": {{Target: "svc", OK: true, At: at(70 * time.Millisecond)}},
		"n2": {{Target: "svc", OK: true, At: at(90 * time.Millisecond)}},
	}
	tr := LatencyTrial(result.SvcLatency, 1, []string{"n1", "n2"}, byNode, true, sent, created)
	if tr.LatencyNs == nil || *tr.LatencyNs != float64(-10*time.Millisecond) {
		t.Errorf("latency %v, want n2's -10ms", tr.LatencyNs)
	}
	if g := slowestSync(tr); g != "" {
		t.Errorf("kube-proxy %q without its figures", g)
	}
	tr.Nodes[0].KubeProxy = &result.KubeProxySyncs{PartialSyncs: 1}
	tr.Nodes[1].KubeProxy = &result.KubeProxySyncs{FullSyncs: 1}
	if g := slowestSync(tr); g != SyncFull {
		t.Errorf("kube-proxy %q, want n2's full sync (the slowest node's)", g)
	}
}

func TestLatencyTrialTimeoutIsFailure(t *testing.T) {
	byNode := map[string][]Edge{
		"n1": {{Target: "pol", OK: true, At: at(-time.Second)}, {Target: "pol", OK: false, At: at(20 * time.Millisecond), Err: "timeout"}},
		"n2": {{Target: "pol", OK: true, At: at(-time.Second)}},
	}
	tr := LatencyTrial(result.NetpolDenyLatency, 1, []string{"n1", "n2"}, byNode, false, t0, t0)
	if tr.LatencyNs != nil || !strings.Contains(tr.Error, "no refusal from n2") {
		t.Fatalf("trial %+v: want a failure naming n2, no latency", tr)
	}
	if tr.Nodes[0].LatencyNs == nil || *tr.Nodes[0].LatencyNs != float64(20*time.Millisecond) || tr.Nodes[1].LatencyNs != nil {
		t.Errorf("nodes %+v: n1 measured, n2 without latency", tr.Nodes)
	}
}

func TestSummarizeLatency(t *testing.T) {
	var trials []Trial
	for i, ms := range []float64{10, 30, 20, 50, 40, 60, 70, 80, 90, 100} {
		v := ms * 1e6
		trials = append(trials, Trial{Test: result.SvcLatency, N: i + 1, LatencyNs: &v})
	}
	trials = append(trials, Trial{Test: result.SvcLatency, N: 11, Error: "no success from n2 within 2m0s"})
	trials = append(trials, Trial{Test: result.NetpolDenyLatency, N: 1, Error: "flannel does not enforce", Missing: true})
	sums := SummarizeLatency(trials)
	if len(sums) != 2 || sums[0].Test != result.SvcLatency || sums[1].Test != result.NetpolDenyLatency {
		t.Fatalf("summaries %+v", sums)
	}
	s := sums[0]
	if s.Trials != 11 || s.OK != 10 || s.Failed != 1 || !strings.Contains(s.FirstError, "trial 11: no success from n2") {
		t.Errorf("counts %+v", s)
	}
	// The failure is not a value: median of 10..100 is 55, p90 91.
	if *s.MedianMs != 55 || math.Abs(*s.P90Ms-91) > 1e-9 || *s.MaxMs != 100 {
		t.Errorf("median %v p90 %v max %v", *s.MedianMs, *s.P90Ms, *s.MaxMs)
	}
	if s.MedianCI.Low > 55 || s.MedianCI.High < 55 || s.MedianCI.Level < 0.95 {
		t.Errorf("CI %+v", *s.MedianCI)
	}
	if m := sums[1]; m.MedianMs != nil || m.Missing == "" || m.OK != 0 {
		t.Errorf("missing test %+v: want no value and the reason", m)
	}
	var b strings.Builder
	if err := WriteLatencyTable(&b, sums); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"svc_latency", "55.0", "netpol_deny_latency: missing: flannel does not enforce", "1 of 11 trials failed"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestLatencySampleAndMetric(t *testing.T) {
	v := 12.5e6
	s := LatencySample(7, 1, Trial{Test: result.SvcLatency, N: 1, CreatedAt: t0, LatencyNs: &v}, "v0")
	m := result.Metrics["control_plane_ms"]
	if got, ok := m.Get(s.Result); !ok || got != 12.5 || s.Error != "" || m.HigherIsBetter {
		t.Errorf("stored %v (%v), error %q; want 12.5 ms, lower is better", got, ok, s.Error)
	}
	f := LatencySample(7, 2, Trial{Test: result.SvcLatency, N: 2, Error: "no success from n1"}, "v0")
	if f.Result != nil || f.Error != "no success from n1" {
		t.Errorf("a failed trial stored as %+v; want no result and the reason", f)
	}
}

func TestLatencyCommandOptions(t *testing.T) {
	ok := LatencyCommand{Trials: 20, Kinds: "pod,service", Timeout: time.Minute}
	o, err := ok.Options()
	if err != nil || strings.Join(o.Kinds, ",") != "service,pod" {
		t.Fatalf("kinds %v, %v; want service,pod in run order", o.Kinds, err)
	}
	for _, c := range []LatencyCommand{
		{Trials: 0, Kinds: "all", Timeout: time.Minute},
		{Trials: 5, Kinds: "service,ingress", Timeout: time.Minute},
		{Trials: 5, Kinds: "", Timeout: time.Minute},
		{Trials: 5, Kinds: "all", Services: MaxServices + 1, Timeout: time.Minute},
		{Trials: 5, Kinds: "all", Timeout: time.Millisecond},
	} {
		if _, err := c.Options(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", c, err)
		}
	}
}

func TestEnforcesPolicy(t *testing.T) {
	for cni, want := range map[string]bool{"cilium": true, "calico": true, "flannel": false, "bridge": false,
		"unknown (bridge?)": false, "mixed (n1=cilium, n2=bridge)": false} {
		ok, why := enforcesPolicy(cni)
		if ok != want || (!ok && !strings.Contains(why, cni)) {
			t.Errorf("%s: %v %q, want %v with the CNI named", cni, ok, why, want)
		}
	}
}
