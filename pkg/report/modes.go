package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
)

// FlagModes marks a cell whose samples form two modes (stats.FindTwoModes):
// its median and interval describe neither, so the report shows the two.
const FlagModes = "2 modes"

// Modes is a two-mode cell: each mode's median and size, and which of the
// conditions recorded with the samples tells them apart.
type Modes struct {
	Low, High Mode
	// Within is the share of the variance left inside the modes.
	Within float64
	// Separated names the condition that separates the modes (nil when
	// none does); Tried lists the conditions that were compared, and
	// Unrecorded those the samples do not carry.
	Separated         *ModeSeparation
	Tried, Unrecorded []string
}

// Mode is one mode of a cell: its median and how many samples it holds.
type Mode struct {
	Median float64
	N      int
}

// ModeSeparation is the condition that best tells the modes apart, and
// what it was in each mode ("one CPU" in 6 of 6, or a median figure).
type ModeSeparation struct {
	Condition string
	// Low and High describe the condition in each mode's samples.
	Low, High string
	// Accuracy is the share of samples the condition puts in their own
	// mode; P the family-wise chance of doing as well at random.
	Accuracy, P float64
}

// sampleOf is one valued sample of a cell, for the mode analysis.
type sampleOf struct {
	v   float64
	seq int
	rep int // the sample's repeat (round) within the run
	r   *result.Result
}

// findModes applies the two-mode rule to a cell's samples and, for two
// modes, looks among their recorded conditions for what separates them.
func findModes(vals []sampleOf) *Modes {
	x := make([]float64, len(vals))
	for i, s := range vals {
		x[i] = s.v
	}
	tm, ok := stats.FindTwoModes(x)
	if !ok {
		return nil
	}
	m := &Modes{Low: Mode{tm.LowMedian, len(tm.Low)}, High: Mode{tm.HighMedian, len(tm.High)}, Within: tm.Within}
	low := make([]bool, len(vals))
	for _, i := range tm.Low {
		low[i] = true
	}
	var fs []stats.Feature
	units := map[string]string{}
	for _, c := range sampleConditions {
		f, ok := c.feature(vals)
		if !ok {
			if !contains(m.Unrecorded, c.source) {
				m.Unrecorded = append(m.Unrecorded, c.source)
			}
			continue
		}
		fs, units[c.name] = append(fs, f), c.unit
	}
	sep, ok := stats.BestSeparation(low, fs)
	for _, f := range fs {
		if varies(f) {
			m.Tried = append(m.Tried, f.Name)
		}
	}
	if ok {
		for _, f := range fs {
			if f.Name == sep.Feature {
				m.Separated = &ModeSeparation{Condition: f.Name, Low: describe(f, units[f.Name], low, true), High: describe(f, units[f.Name], low, false),
					Accuracy: sep.Accuracy, P: sep.P}
			}
		}
	}
	return m
}

// varies reports whether a feature takes more than one value.
func varies(f stats.Feature) bool {
	for i := 1; i < len(f.Cat); i++ {
		if f.Cat[i] != f.Cat[0] {
			return true
		}
	}
	for i := 1; i < len(f.Num); i++ {
		if f.Num[i] != f.Num[0] {
			return true
		}
	}
	return false
}

// describe says what a condition was in one mode's samples: its commonest
// category with a count ("on one CPU (6 of 6)"), or its median ("0.0%
// (median)").
func describe(f stats.Feature, unit string, low []bool, inLow bool) string {
	if f.Cat != nil {
		count := map[string]int{}
		n := 0
		for i, c := range f.Cat {
			if low[i] == inLow {
				count[c]++
				n++
			}
		}
		best := ""
		for _, c := range slices.Sorted(maps.Keys(count)) {
			if best == "" || count[c] > count[best] {
				best = c
			}
		}
		return fmt.Sprintf("%s (%d of %d)", best, count[best], n)
	}
	var v []float64
	for i, x := range f.Num {
		if low[i] == inLow {
			v = append(v, x)
		}
	}
	med := FormatNumber(stats.Median(v))
	switch unit {
	case "×", "#":
		med = unit + med
	default:
		med += unit
	}
	return med + " (median)"
}

// condition is one thing recorded with each sample that may tell two
// modes apart: a category or a number (in unit: "%", "×", "#" or none)
// per sample. source names the recorded field, for a note on samples
// that lack it.
type condition struct {
	name, unit, source string
	cat                func(*result.Result) (string, bool)
	num                func(sampleOf) (float64, bool)
}

// feature is the condition over a cell's samples; false when a sample
// does not record it.
func (c condition) feature(vals []sampleOf) (stats.Feature, bool) {
	f := stats.Feature{Name: c.name}
	for _, s := range vals {
		if c.cat != nil {
			v, ok := c.cat(s.r)
			if !ok {
				return f, false
			}
			f.Cat = append(f.Cat, v)
			continue
		}
		v, ok := c.num(s)
		if !ok {
			return f, false
		}
		f.Num = append(f.Num, v)
	}
	return f, true
}

// sampleConditions are the conditions tried, in the order a tie is
// broken: where the measuring threads ran first (the suspect for
// tcp_lat's 2.3/5.0 µs split), the machine's state next, the sample's
// place in the run last.
var sampleConditions = []condition{
	{name: "where client and server ran", source: ranOnSource, cat: func(r *result.Result) (string, bool) {
		c, s, ok := ranOn(r)
		switch {
		case !ok:
			return "", false
		case c < 0 || s < 0:
			return "moving between CPUs", true
		case c == s:
			return "on one CPU", true
		}
		return "on two CPUs", true
	}},
	{name: "the CPUs client and server ran on", source: ranOnSource, cat: func(r *result.Result) (string, bool) {
		c, s, ok := ranOn(r)
		if !ok {
			return "", false
		}
		return fmt.Sprintf("client %s, server %s", cpuName(c), cpuName(s)), true
	}},
	{name: "CPU pinning", source: "the pinning (conditions.client_cpu/server_cpu)", cat: func(r *result.Result) (string, bool) {
		c := conditionsOf(r)
		if c == nil {
			return "", false
		}
		return placement(c), true
	}},
	{name: "wake-up policy", source: "the wake-up policy (conditions.wakeup)", cat: func(r *result.Result) (string, bool) {
		c := conditionsOf(r)
		if c == nil || c.Wakeup == "" {
			return "", false
		}
		return c.Wakeup, true
	}},
	{name: "disturbed", source: disturbanceSource, cat: func(r *result.Result) (string, bool) {
		d := disturbanceOf(r)
		if d == nil {
			return "", false
		}
		if d.Disturbed {
			return "disturbed", true
		}
		return "quiet", true
	}},
	{name: "host CPU idle", unit: "%", source: "the host's CPU split (cpu.*.idle_pct)", num: func(s sampleOf) (float64, bool) {
		if s.r.CPU == nil {
			return 0, false
		}
		for _, side := range []*result.CPUSide{s.r.CPU.Client, s.r.CPU.Server} {
			if side != nil && side.IdlePct != nil {
				return *side.IdlePct, true
			}
		}
		return 0, false
	}},
	{name: "other processes' CPU", unit: "%", source: disturbanceSource, num: disturbanceFigure(func(d *result.Disturbance) float64 { return d.OthersCPUPct })},
	{name: "steal", unit: "%", source: disturbanceSource, num: disturbanceFigure(func(d *result.Disturbance) float64 { return d.StealPct })},
	{name: "spin-loop slowdown", unit: "×", source: disturbanceSource, num: disturbanceFigure(func(d *result.Disturbance) float64 { return d.SpinSlowdown })},
	{name: "load average", source: disturbanceSource, num: disturbanceFigure(func(d *result.Disturbance) float64 { return d.Load1 })},
	{name: "position in the run", unit: "#", num: func(s sampleOf) (float64, bool) { return float64(s.seq), true }},
}

// Sources of conditions that several conditions read.
const (
	ranOnSource       = "where each side's threads ran (cpu.*.ran_on)"
	disturbanceSource = "the disturbance stamp (conditions.disturbance)"
)

func disturbanceOf(r *result.Result) *result.Disturbance {
	if c := conditionsOf(r); c != nil {
		return c.Disturbance
	}
	return nil
}

func disturbanceFigure(get func(*result.Disturbance) float64) func(sampleOf) (float64, bool) {
	return func(s sampleOf) (float64, bool) {
		d := disturbanceOf(s.r)
		if d == nil {
			return 0, false
		}
		return get(d), true
	}
}

// MovingShare is the share of a side's samples below which it is said to
// have moved between CPUs rather than run on its commonest one.
const MovingShare = 90.0

// ranOn is the CPU each side's measuring threads ran on (-1: moving
// between CPUs), from CPUSide.RanOn; false when either side has none.
func ranOn(r *result.Result) (client, server int, ok bool) {
	if r.CPU == nil {
		return 0, 0, false
	}
	cpu := func(s *result.CPUSide) (int, bool) {
		if s == nil || len(s.RanOn) == 0 {
			return 0, false
		}
		top := s.RanOn[0]
		for _, c := range s.RanOn {
			if c.Pct > top.Pct {
				top = c
			}
		}
		if top.Pct < MovingShare {
			return -1, true
		}
		return top.CPU, true
	}
	c, okc := cpu(r.CPU.Client)
	s, oks := cpu(r.CPU.Server)
	return c, s, okc && oks
}

func cpuName(c int) string {
	if c < 0 {
		return "moving"
	}
	return fmt.Sprintf("on CPU %d", c)
}

// modesText is a two-mode cell's value in a table: each mode's median and
// size, "2.31 (n=6) / 5.02 (n=4)", in the column's unit.
func modesText(m *Modes, scale float64) string {
	return fmt.Sprintf("%s (n=%d) / %s (n=%d)", FormatNumber(m.Low.Median*scale), m.Low.N, FormatNumber(m.High.Median*scale), m.High.N)
}

// modesNote explains a two-mode cell: both modes, and what separated
// their samples or that nothing recorded did.
func modesNote(c *Cell, col Column) string {
	m := c.Modes
	lo := FormatNumber(m.Low.Median*col.Scale) + " " + col.Unit
	hi := FormatNumber(m.High.Median*col.Scale) + " " + col.Unit
	s := fmt.Sprintf("%s %s %s: two modes, %s (%d samples) and %s (%d); ", c.Arm, c.Test, FormatSize(c.Size), lo, m.Low.N, hi, m.High.N)
	if sep := m.Separated; sep != nil {
		s += fmt.Sprintf("%s separates them: %s in the %s samples, %s in the %s ones (family-wise p=%s over %d conditions)",
			sep.Condition, sep.Low, lo, sep.High, hi, stats.FormatP(sep.P), len(m.Tried))
	} else {
		s += "nothing recorded with the samples separates them"
		if len(m.Tried) > 0 {
			s += " (compared: " + strings.Join(m.Tried, ", ") + ")"
		}
	}
	if len(m.Unrecorded) > 0 {
		s += "; not recorded: " + strings.Join(m.Unrecorded, ", ")
	}
	return s
}
