package stages

import (
	"fmt"
	"strings"

	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
)

// Units of a stage's cost.
const (
	// PerTransaction is CPU-µs per transaction (latency and CRR tests).
	PerTransaction = "cpu_us_per_transaction"
	// PerGB is CPU-seconds per GB received (stream tests).
	PerGB = "cpu_s_per_gb"
)

// Busy reports whether a stage is CPU spent on the measurement: everything
// but idle and other processes.
func Busy(s Stage) bool { return s != Idle && s != OtherProcs }

// Repeat is one sample's profile grouped into stages and costed.
type Repeat struct {
	Seq       int       `json:"seq"`
	Repeat    int       `json:"repeat"`
	Breakdown Breakdown `json:"breakdown"`
	// Cost per stage in Unit (self time); nil with Missing set when the
	// profile cannot be turned into time or the result has no work count.
	Cost    map[Stage]float64 `json:"cost,omitempty"`
	Total   *float64          `json:"total,omitempty"` // summed over busy stages
	Missing string            `json:"missing,omitempty"`
}

// Cell is one arm, test and size: the repeats' profiles merged for the
// shares, and the per-repeat costs for explain's significance.
type Cell struct {
	Arm     string    `json:"arm"`
	Test    string    `json:"test"`
	MsgSize int       `json:"msg_size_bytes"`
	Unit    string    `json:"unit"`
	Shares  Breakdown `json:"shares"` // all repeats' samples together
	Repeats []Repeat  `json:"repeats"`
	// Cost is the median over the repeats of each busy stage's cost in
	// Unit, Total the median of the repeats' totals; nil (with
	// CostMissing) when no repeat could be costed.
	Cost        map[Stage]float64 `json:"cost,omitempty"`
	Total       *float64          `json:"total,omitempty"`
	CostMissing string            `json:"cost_missing,omitempty"`
	Stacks      map[string]uint64 `json:"-"`
}

// unitOf: streams are costed per GB, everything else per transaction.
func unitOf(test string) string {
	if strings.HasSuffix(test, "_bw") || strings.HasSuffix(test, "_stream") {
		return PerGB
	}
	return PerTransaction
}

// work is how many units of work the window did: transactions, or GB.
func work(unit string, r *result.Result, windowSec float64) (float64, error) {
	if r == nil {
		return 0, fmt.Errorf("the step has no result")
	}
	if unit == PerGB {
		if r.Throughput == nil || r.Throughput.ReceiverBps == nil || *r.Throughput.ReceiverBps <= 0 {
			return 0, fmt.Errorf("the result has no receiver throughput")
		}
		return *r.Throughput.ReceiverBps * windowSec / 8 / 1e9, nil
	}
	if r.Transactions != nil && r.Transactions.PerSec > 0 {
		return r.Transactions.PerSec * windowSec, nil
	}
	if r.Latency != nil && r.Latency.RTTNs.Mean != nil && *r.Latency.RTTNs.Mean > 0 {
		// One transaction in flight: a round trip each.
		return windowSec * 1e9 / *r.Latency.RTTNs.Mean, nil
	}
	return 0, fmt.Errorf("the result has no transaction rate")
}

// Cells groups a run's profiles by arm, test and size.
func Cells(samples []store.Sample, profiles map[int]*store.Profile) ([]*Cell, error) {
	type key struct {
		arm, test string
		size      int
	}
	byKey := map[key]*Cell{}
	var order []key
	for _, s := range samples {
		p := profiles[s.Seq]
		if p == nil {
			continue
		}
		k := key{s.Arm, s.Test, s.MsgSize}
		c := byKey[k]
		if c == nil {
			c = &Cell{Arm: s.Arm, Test: s.Test, MsgSize: s.MsgSize, Unit: unitOf(s.Test), Stacks: map[string]uint64{}}
			byKey[k] = c
			order = append(order, k)
		}
		rep := Repeat{Seq: s.Seq, Repeat: s.Repeat}
		if p.Missing != "" {
			rep.Missing = p.Missing
			c.Repeats = append(c.Repeats, rep)
			continue
		}
		stacks, err := profile.ParseFolded(strings.NewReader(p.Folded))
		if err != nil {
			return nil, fmt.Errorf("profile of sample %d: %w", s.Seq, err)
		}
		for st, n := range stacks {
			c.Stacks[st] += n
		}
		rep.Breakdown = Aggregate(stacks)
		rep.Cost, rep.Total, rep.Missing = cost(c.Unit, p, s.Result, rep.Breakdown)
		c.Repeats = append(c.Repeats, rep)
	}
	out := make([]*Cell, 0, len(order))
	for _, k := range order {
		c := byKey[k]
		c.Shares = Aggregate(c.Stacks)
		if t := c.totals(); len(t) > 0 {
			m := stats.Median(t)
			c.Total = &m
			c.Cost = map[Stage]float64{}
			for _, sh := range c.Shares.Stages {
				if Busy(sh.Stage) && sh.Self > 0 {
					c.Cost[sh.Stage] = stats.Median(c.costs(sh.Stage))
				}
			}
		} else {
			c.CostMissing = firstMissing(c)
		}
		out = append(out, c)
	}
	return out, nil
}

// cost turns a repeat's stage samples into CPU per unit of work: a
// cpu-clock sample stands for its period in nanoseconds of CPU time
// (PeriodSum/Samples on average).
func cost(unit string, p *store.Profile, r *result.Result, b Breakdown) (map[Stage]float64, *float64, string) {
	if p.Event != string(profile.EventCPUClock) {
		return nil, nil, fmt.Sprintf("a %s profile does not convert to CPU time (use --profile-event cpu-clock)", p.Event)
	}
	if p.Samples == 0 || p.PeriodSum == 0 {
		return nil, nil, "the window has no samples"
	}
	w, err := work(unit, r, float64(p.WindowNs)/1e9)
	if err != nil {
		return nil, nil, err.Error()
	}
	nsPerSample := float64(p.PeriodSum) / float64(p.Samples)
	scale := nsPerSample / 1e3 / w // CPU-µs per transaction
	if unit == PerGB {
		scale = nsPerSample / 1e9 / w // CPU-s per GB
	}
	out := map[Stage]float64{}
	total := 0.0
	for _, s := range b.Stages {
		if !Busy(s.Stage) {
			continue
		}
		v := float64(s.Self) * scale
		out[s.Stage] = v
		total += v
	}
	return out, &total, ""
}

// costs returns a stage's per-repeat cost (0 for a repeat whose profile has
// none of it; repeats without a cost are left out).
func (c *Cell) costs(s Stage) []float64 {
	var out []float64
	for _, r := range c.Repeats {
		if r.Cost == nil {
			continue
		}
		out = append(out, r.Cost[s])
	}
	return out
}

func (c *Cell) totals() []float64 {
	var out []float64
	for _, r := range c.Repeats {
		if r.Total != nil {
			out = append(out, *r.Total)
		}
	}
	return out
}

// busyStages lists the busy stages either cell has, in report order.
func busyStages(a, b *Cell) []Stage {
	m := map[Stage]uint64{}
	for _, c := range []*Cell{a, b} {
		for _, s := range c.Shares.Stages {
			if Busy(s.Stage) && s.Self > 0 {
				m[s.Stage] += s.Self
			}
		}
	}
	return sortStages(m)
}
