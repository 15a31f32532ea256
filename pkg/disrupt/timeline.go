package disrupt

import (
	"math"
	"slices"
	"time"
)

// Outcome is what became of one probe request.
type Outcome uint8

// Outcomes of a request.
const (
	// OK: answered within the probe's timeout.
	OK Outcome = iota
	// Failed: the kernel refused it (a send or connect error, a reset).
	Failed
	// Timeout: no answer within the probe's timeout (a late answer counts
	// here too: the caller had given up on it).
	Timeout
)

// Request is one probe request: when it was sent, relative to the probe's
// start, how long its answer took, and what became of it.
type Request struct {
	Sent    time.Duration
	Latency time.Duration // OK requests only
	Outcome Outcome
}

// Mark is an event as it happened: the instants its change started and
// finished, relative to the probe's start, and the CPU the datapath agent
// spent doing it.
type Mark struct {
	Kind  string
	Label string
	Start time.Duration
	End   time.Duration
	// AgentCPU is the agent's CPU time for the change; AgentCPUReason says
	// why it is missing when it could not be measured.
	AgentCPU       *time.Duration
	AgentCPUReason string
	Detail         string
}

// Bucket is one slice of the timeline.
type Bucket struct {
	StartMs  float64 `json:"start_ms"`
	Sent     int     `json:"sent"`
	OK       int     `json:"ok"`
	Failed   int     `json:"failed"`
	Timeouts int     `json:"timeouts"`
	// RatePerSec is answered requests per second in the bucket.
	RatePerSec float64 `json:"rate_per_sec"`
	// P50Us and P99Us are the answered requests' latency; null when the
	// bucket has none answered (a blackout, not a fast bucket).
	P50Us *float64 `json:"p50_us"`
	P99Us *float64 `json:"p99_us"`
}

// EventResult is one event on the timeline and the disruption it caused.
type EventResult struct {
	Kind    string  `json:"kind"`
	Label   string  `json:"label,omitempty"`
	StartMs float64 `json:"start_ms"`
	EndMs   float64 `json:"end_ms"`
	// WindowEndMs ends the window the event is judged in: the next
	// event's window (its start less the timeline's window_lead_ms) or
	// the probe's end. The window opens window_lead_ms before StartMs.
	WindowEndMs float64 `json:"window_end_ms"`
	Sent        int     `json:"sent"`
	Failed      int     `json:"failed"`
	Timeouts    int     `json:"timeouts"`
	// LongestGapMs is the longest run of unanswered requests in the
	// window: from the send of its first request to the send of the next
	// answered one. 0 when every request was answered.
	LongestGapMs float64 `json:"longest_gap_ms"`
	// RecoverMs is from the event's start to the send of the first
	// answered request after the window's last unanswered one; 0 when
	// every request was answered (negative would mean the loss was over
	// before the event's start, within the window's lead). Null (with RecoverReason) when the
	// probe never recovered within the window.
	RecoverMs     *float64 `json:"recover_ms"`
	RecoverReason string   `json:"recover_reason,omitempty"`
	// P99Us is the answered requests' p99 in the window, beside the
	// timeline's before the first event (Timeline.BaselineP99Us).
	P99Us *float64 `json:"p99_us"`
	// AgentCPUMs is the CPU the datapath agent spent making the change.
	AgentCPUMs       *float64 `json:"agent_cpu_ms"`
	AgentCPUReason   string   `json:"agent_cpu_reason,omitempty"`
	Detail           string   `json:"detail,omitempty"`
	ChangeDurationMs float64  `json:"change_duration_ms"`
}

// Timeline is a probe's requests cut into fixed buckets, with the events
// that happened while it ran.
type Timeline struct {
	Probe      string  `json:"probe"`
	RatePerSec float64 `json:"rate_per_sec"`
	TimeoutMs  float64 `json:"timeout_ms"`
	// BucketMs is the timeline's resolution: rate, failures, timeouts
	// and percentiles are per bucket. Gaps and recovery are measured from
	// the requests' own timestamps, whose resolution is 1000/RatePerSec ms.
	BucketMs float64 `json:"bucket_ms"`
	// WindowLeadMs is how long before its start an event's window opens:
	// InFlight, or twice BaselineP99Us when longer, at most the timeout.
	WindowLeadMs  float64       `json:"window_lead_ms"`
	DurationMs    float64       `json:"duration_ms"`
	Sent          int           `json:"sent"`
	BaselineP99Us *float64      `json:"baseline_p99_us"`
	Buckets       []Bucket      `json:"buckets"`
	Events        []EventResult `json:"events"`
}

// Build cuts reqs (in send order) into buckets of width bucket over
// [0, dur) and judges each mark in its window.
func Build(probe string, rate float64, timeout, bucket, dur time.Duration, reqs []Request, marks []Mark) *Timeline {
	tl := &Timeline{Probe: probe, RatePerSec: rate, TimeoutMs: ms(timeout), BucketMs: ms(bucket),
		DurationMs: ms(dur), WindowLeadMs: ms(InFlight), Sent: len(reqs), Buckets: []Bucket{}, Events: []EventResult{}}
	n := int(math.Ceil(float64(dur) / float64(bucket)))
	lat := make([][]float64, n)
	tl.Buckets = make([]Bucket, n)
	for i := range tl.Buckets {
		tl.Buckets[i].StartMs = ms(time.Duration(i) * bucket)
	}
	for _, r := range reqs {
		i := int(r.Sent / bucket)
		if i < 0 || i >= n {
			continue
		}
		b := &tl.Buckets[i]
		b.Sent++
		switch r.Outcome {
		case OK:
			b.OK++
			lat[i] = append(lat[i], float64(r.Latency)/1e3)
		case Failed:
			b.Failed++
		case Timeout:
			b.Timeouts++
		}
	}
	for i := range tl.Buckets {
		b := &tl.Buckets[i]
		b.RatePerSec = float64(b.OK) / bucket.Seconds()
		b.P50Us, b.P99Us = quantile(lat[i], 0.50), quantile(lat[i], 0.99)
	}
	first := dur
	if len(marks) > 0 {
		first = marks[0].Start
	}
	tl.BaselineP99Us = quantile(latencies(reqs, 0, first), 0.99)
	lead := InFlight
	if tl.BaselineP99Us != nil {
		// On a loaded host (or a userspace datapath) round trips are
		// longer, and so is the time a request is on the wire.
		lead = max(lead, time.Duration(2**tl.BaselineP99Us*1e3))
	}
	lead = min(lead, timeout)
	tl.WindowLeadMs = ms(lead)
	for i, m := range marks {
		end := dur
		if i+1 < len(marks) {
			end = marks[i+1].Start - lead
		}
		tl.Events = append(tl.Events, judge(reqs, m, m.Start-lead, end))
	}
	return tl
}

// InFlight is the least an event's window opens before its start: a
// request sent just before an event can still be lost to it (it was on
// the wire when the change landed), and belongs to that event, not to the
// one before. The lead is twice the probe's p99 before the first event
// when that is longer (a loaded host, a userspace datapath), at most the
// timeout; steady traffic before an event loses nothing, so the lead
// takes in no loss of another cause.
const InFlight = 20 * time.Millisecond

// judge measures the disruption of mark m among the requests sent in
// [from, end).
func judge(reqs []Request, m Mark, from, end time.Duration) EventResult {
	e := EventResult{Kind: m.Kind, Label: m.Label, StartMs: ms(m.Start), EndMs: ms(m.End), WindowEndMs: ms(end),
		ChangeDurationMs: ms(m.End - m.Start), Detail: m.Detail, AgentCPUReason: m.AgentCPUReason}
	if m.AgentCPU != nil {
		v := ms(*m.AgentCPU)
		e.AgentCPUMs = &v
	}
	lo, _ := slices.BinarySearchFunc(reqs, from, func(r Request, t time.Duration) int { return cmpDur(r.Sent, t) })
	hi, _ := slices.BinarySearchFunc(reqs, end, func(r Request, t time.Duration) int { return cmpDur(r.Sent, t) })
	w := reqs[lo:max(lo, hi)]
	e.Sent = len(w)
	var lat []float64
	gapStart := time.Duration(-1) // send time of the current run's first unanswered request
	lastBad := -1
	for i, r := range w {
		switch r.Outcome {
		case OK:
			lat = append(lat, float64(r.Latency)/1e3)
			if gapStart >= 0 {
				e.LongestGapMs = max(e.LongestGapMs, ms(r.Sent-gapStart))
				gapStart = -1
			}
		case Failed, Timeout:
			if r.Outcome == Failed {
				e.Failed++
			} else {
				e.Timeouts++
			}
			if gapStart < 0 {
				gapStart = r.Sent
			}
			lastBad = i
		}
	}
	e.P99Us = quantile(lat, 0.99)
	switch {
	case lastBad < 0:
		zero := 0.0
		e.RecoverMs = &zero
	case gapStart >= 0:
		// The window ends inside a gap: neither its length nor the
		// recovery is known.
		e.LongestGapMs = max(e.LongestGapMs, ms(end-gapStart))
		e.RecoverReason = "no request was answered between the last unanswered one and the end of the window"
	default:
		for _, r := range w[lastBad+1:] {
			if r.Outcome == OK {
				v := ms(r.Sent - m.Start)
				e.RecoverMs = &v
				break
			}
		}
	}
	return e
}

func latencies(reqs []Request, from, to time.Duration) []float64 {
	var out []float64
	for _, r := range reqs {
		if r.Outcome == OK && r.Sent >= from && r.Sent < to {
			out = append(out, float64(r.Latency)/1e3)
		}
	}
	return out
}

// quantile is the nearest-rank q-quantile of xs (sorted in place); nil
// for no values.
func quantile(xs []float64, q float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	slices.Sort(xs)
	k := int(math.Ceil(q*float64(len(xs)))) - 1
	v := xs[min(max(k, 0), len(xs)-1)]
	return &v
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
