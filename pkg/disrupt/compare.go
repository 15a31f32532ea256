package disrupt

import (
	"math"

	"github.com/cnibench/cnibench/pkg/stats"
)

// Comparison is one figure of one event kind seen by one probe, an arm
// against the baseline arm: each side's median over its events with the
// median's 95% confidence interval, and the verdict.
type Comparison struct {
	Probe  string `json:"probe"`
	Event  string `json:"event"`
	Metric string `json:"metric"` // longest_gap_ms, lost, recover_ms, p99_us, agent_cpu_ms
	A      string `json:"a"`
	B      string `json:"b"`
	NA     int    `json:"n_a"`
	NB     int    `json:"n_b"`
	// MedianA and MedianB are null when a side has no value (every
	// event's recovery unknown, an agent CPU not measured); Reason says so.
	MedianA *float64  `json:"median_a"`
	MedianB *float64  `json:"median_b"`
	CIA     *stats.CI `json:"ci_a"`
	CIB     *stats.CI `json:"ci_b"`
	P       *float64  `json:"p"`
	// Verdict is B against A, lower being better for every metric:
	// better, worse, equivalent (within ±5 %), undecided, or no
	// difference when both sides are all zero (no disruption at all).
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
}

// Metrics compared, in order, and how each is read off an event.
var compareMetrics = []struct {
	name string
	get  func(e *EventResult) (float64, bool)
}{
	{"longest_gap_ms", func(e *EventResult) (float64, bool) { return e.LongestGapMs, true }},
	{"lost", func(e *EventResult) (float64, bool) { return float64(e.Failed + e.Timeouts), true }},
	{"recover_ms", func(e *EventResult) (float64, bool) {
		if e.RecoverMs == nil {
			return 0, false
		}
		return *e.RecoverMs, true
	}},
	{"p99_us", func(e *EventResult) (float64, bool) {
		if e.P99Us == nil {
			return 0, false
		}
		return *e.P99Us, true
	}},
	{"agent_cpu_ms", func(e *EventResult) (float64, bool) {
		if e.AgentCPUMs == nil {
			return 0, false
		}
		return *e.AgentCPUMs, true
	}},
}

// Compare judges every other arm against the baseline arm, per probe,
// event kind (a revert counts as its kind: the same update) and metric.
func Compare(r *Result) []*Comparison {
	var base *ArmResult
	for _, a := range r.Arms {
		if a.Name == r.Baseline {
			base = a
		}
	}
	out := []*Comparison{}
	if base == nil {
		return out
	}
	for _, b := range r.Arms {
		if b == base {
			continue
		}
		for _, ta := range base.Timelines {
			tb := timelineOf(b, ta.Probe)
			if tb == nil {
				continue
			}
			for _, kind := range eventKinds(ta) {
				for _, m := range compareMetrics {
					xa, xb := values(ta, kind, m.get), values(tb, kind, m.get)
					out = append(out, judgeMetric(ta.Probe, kind, m.name, base.Name, b.Name, xa, xb))
				}
			}
		}
	}
	return out
}

func judgeMetric(probe, kind, metric, a, b string, xa, xb []float64) *Comparison {
	c := &Comparison{Probe: probe, Event: kind, Metric: metric, A: a, B: b, NA: len(xa), NB: len(xb)}
	side := func(x []float64) (*float64, *stats.CI) {
		if len(x) == 0 {
			return nil, nil
		}
		m := stats.Median(x)
		ci := stats.MedianCI(x, 0.95)
		return &m, &ci
	}
	c.MedianA, c.CIA = side(xa)
	c.MedianB, c.CIB = side(xb)
	if len(xa) == 0 || len(xb) == 0 {
		c.Verdict = "undecided"
		c.Reason = "no values on one side (not measured for these events)"
		return c
	}
	if allZero(xa) && allZero(xb) {
		c.Verdict = "no difference"
		c.Reason = "zero in every event on both sides"
		return c
	}
	v := stats.JudgeWithin(xa, xb, false, stats.DefaultMargin)
	p := v.Test.P
	if !math.IsNaN(p) {
		c.P = &p
	}
	c.Verdict = v.Outcome.String()
	if *c.MedianA == 0 || *c.MedianB == 0 {
		// A ratio to zero has no interval: the rank test alone decides.
		switch v.Direction {
		case stats.Better:
			c.Verdict = "better"
		case stats.Worse:
			c.Verdict = "worse"
		default:
			c.Verdict = "undecided"
		}
		c.Reason = "a median is 0: judged by the Mann–Whitney test alone"
	}
	if v.Note != "" {
		c.Reason = v.Note
	}
	return c
}

func allZero(x []float64) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

func timelineOf(a *ArmResult, probe string) *Timeline {
	for _, t := range a.Timelines {
		if t.Probe == probe {
			return t
		}
	}
	return nil
}

func eventKinds(t *Timeline) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range t.Events {
		if !seen[e.Kind] {
			seen[e.Kind] = true
			out = append(out, e.Kind)
		}
	}
	return out
}

func values(t *Timeline, kind string, get func(*EventResult) (float64, bool)) []float64 {
	var out []float64
	for i := range t.Events {
		if t.Events[i].Kind != kind {
			continue
		}
		if v, ok := get(&t.Events[i]); ok {
			out = append(out, v)
		}
	}
	return out
}
