package disrupt

import (
	"math"
	"testing"
	"time"
)

// steady makes n requests 1 ms apart answered in 50 µs, except those sent
// in [holeFrom, holeTo), which get outcome.
func steady(n int, holeFrom, holeTo time.Duration, outcome Outcome) []Request {
	out := make([]Request, n)
	for i := range out {
		t := time.Duration(i) * time.Millisecond
		out[i] = Request{Sent: t, Latency: 50 * time.Microsecond, Outcome: OK}
		if t >= holeFrom && t < holeTo {
			out[i] = Request{Sent: t, Outcome: outcome}
		}
	}
	return out
}

func TestBuildMeasuresAHole(t *testing.T) {
	reqs := steady(3000, 1000*time.Millisecond, 1200*time.Millisecond, Timeout)
	marks := []Mark{{Kind: "blackhole", Start: 1000 * time.Millisecond, End: 1200 * time.Millisecond}}
	tl := Build("udp-rr", 1000, 500*time.Millisecond, 100*time.Millisecond, 3*time.Second, reqs, marks)
	if len(tl.Buckets) != 30 {
		t.Fatalf("%d buckets, want 30", len(tl.Buckets))
	}
	for i, b := range tl.Buckets {
		hole := i == 10 || i == 11
		if hole && (b.OK != 0 || b.Timeouts != 100 || b.P50Us != nil || b.RatePerSec != 0) {
			t.Errorf("bucket %d in the hole: %+v", i, b)
		}
		if !hole && (b.OK != 100 || b.Timeouts != 0 || b.P99Us == nil || *b.P99Us != 50 || b.RatePerSec != 1000) {
			t.Errorf("bucket %d outside the hole: %+v", i, b)
		}
	}
	e := tl.Events[0]
	if e.LongestGapMs != 200 || e.Timeouts != 200 || e.Failed != 0 || e.Sent != 2020 {
		t.Errorf("event: gap %v, timeouts %d, failed %d, sent %d; want 200, 200, 0, 2020 (from 20 ms before the event)", e.LongestGapMs, e.Timeouts, e.Failed, e.Sent)
	}
	if e.RecoverMs == nil || *e.RecoverMs != 200 {
		t.Errorf("recover %v, want 200", e.RecoverMs)
	}
	if tl.BaselineP99Us == nil || *tl.BaselineP99Us != 50 {
		t.Errorf("baseline p99 %v", tl.BaselineP99Us)
	}
}

// An event with nothing lost is a measured zero; a window that ends in a
// gap has no recovery and says why; failures count apart from timeouts.
func TestJudgeEdges(t *testing.T) {
	reqs := steady(2000, 1500*time.Millisecond, 2000*time.Millisecond, Failed)
	marks := []Mark{{Kind: "a", Start: 200 * time.Millisecond}, {Kind: "b", Start: 1000 * time.Millisecond}}
	tl := Build("tcp-crr", 1000, time.Second, 100*time.Millisecond, 2*time.Second, reqs, marks)
	a, b := tl.Events[0], tl.Events[1]
	if a.LongestGapMs != 0 || a.RecoverMs == nil || *a.RecoverMs != 0 || a.Timeouts+a.Failed != 0 {
		t.Errorf("quiet event: %+v", a)
	}
	if a.WindowEndMs != 980 || b.WindowEndMs != 2000 {
		t.Errorf("windows end at %v and %v", a.WindowEndMs, b.WindowEndMs)
	}
	if b.Failed != 500 || b.Timeouts != 0 || b.RecoverMs != nil || b.RecoverReason == "" || b.LongestGapMs != 500 {
		t.Errorf("event ending in a gap: %+v", b)
	}
}

func TestQuantileNearestRank(t *testing.T) {
	xs := []float64{}
	for i := 100; i >= 1; i-- {
		xs = append(xs, float64(i))
	}
	if q := quantile(xs, 0.99); *q != 99 {
		t.Errorf("p99 of 1..100 = %v", *q)
	}
	if q := quantile(xs, 0.5); *q != 50 {
		t.Errorf("p50 of 1..100 = %v", *q)
	}
	if quantile(nil, 0.5) != nil {
		t.Error("quantile of nothing is not missing")
	}
}

func TestCompareVerdicts(t *testing.T) {
	ev := func(gap float64, cpu float64) EventResult {
		return EventResult{Kind: "endpoint-change", LongestGapMs: gap, AgentCPUMs: &cpu}
	}
	arm := func(name string, gaps []float64, cpu float64) *ArmResult {
		tl := &Timeline{Probe: "udp-rr"}
		for _, g := range gaps {
			tl.Events = append(tl.Events, ev(g, cpu+g/1000))
		}
		return &ArmResult{Name: name, Timelines: []*Timeline{tl}}
	}
	r := &Result{Baseline: "ipt", Arms: []*ArmResult{
		arm("ipt", []float64{300, 310, 290, 305, 295, 320, 280, 315}, 400),
		arm("nft", []float64{0, 0, 0, 0, 0, 0, 0, 0}, 2),
	}}
	cs := Compare(r)
	got := map[string]*Comparison{}
	for _, c := range cs {
		got[c.Metric] = c
	}
	if c := got["longest_gap_ms"]; c == nil || c.Verdict != "better" || *c.MedianA != 302.5 || *c.MedianB != 0 {
		t.Errorf("gap: %+v", c)
	}
	if c := got["agent_cpu_ms"]; c == nil || c.Verdict != "better" || c.P == nil || *c.P >= 0.05 {
		t.Errorf("cpu: %+v", c)
	}
	if c := got["lost"]; c == nil || c.Verdict != "no difference" {
		t.Errorf("lost (none on either side): %+v", c)
	}
	if c := got["recover_ms"]; c == nil || c.Verdict != "undecided" || c.MedianA != nil {
		t.Errorf("recover (never measured): %+v", c)
	}
	if math.IsNaN(*got["longest_gap_ms"].MedianA) {
		t.Error("NaN median")
	}
}

// A request sent just before an event and lost to it belongs to that
// event: the event before it recovered, and this one's gap starts there.
func TestInFlightRequestBelongsToTheNextEvent(t *testing.T) {
	reqs := steady(3000, 1997*time.Millisecond, 2150*time.Millisecond, Timeout)
	marks := []Mark{{Kind: "a", Start: 1000 * time.Millisecond}, {Kind: "b", Start: 2000 * time.Millisecond}}
	tl := Build("udp-rr", 1000, time.Second, 100*time.Millisecond, 3*time.Second, reqs, marks)
	a, b := tl.Events[0], tl.Events[1]
	if a.Timeouts != 0 || a.RecoverMs == nil || *a.RecoverMs != 0 {
		t.Errorf("event before: %+v", a)
	}
	if b.Timeouts != 153 || b.LongestGapMs != 153 || b.RecoverMs == nil || *b.RecoverMs != 150 {
		t.Errorf("event: timeouts %d, gap %v, recover %v; want 153, 153, 150", b.Timeouts, b.LongestGapMs, b.RecoverMs)
	}
}

// On a slow path the window opens twice the baseline p99 early: requests
// sent 60 ms before an event at a 30 ms p99 and lost belong to it.
func TestWindowLeadFollowsTheBaseline(t *testing.T) {
	reqs := steady(3000, 1940*time.Millisecond, 2150*time.Millisecond, Timeout)
	for i := range reqs {
		if reqs[i].Outcome == OK {
			reqs[i].Latency = 30 * time.Millisecond
		}
	}
	marks := []Mark{{Kind: "a", Start: 1000 * time.Millisecond}, {Kind: "b", Start: 2000 * time.Millisecond}}
	tl := Build("udp-rr", 1000, 500*time.Millisecond, 100*time.Millisecond, 3*time.Second, reqs, marks)
	if tl.WindowLeadMs != 60 {
		t.Errorf("lead %v ms, want 60 (2 × p99 30 ms)", tl.WindowLeadMs)
	}
	a, b := tl.Events[0], tl.Events[1]
	if a.Timeouts != 0 || b.Timeouts != 210 || b.RecoverMs == nil || *b.RecoverMs != 150 {
		t.Errorf("event before: %d lost; event: %d lost, recover %v; want 0, 210, 150", a.Timeouts, b.Timeouts, b.RecoverMs)
	}
}
