package report

// Analyze: a stored run's samples become cells, each with its summary
// statistics, flags, modes, ratio to the baseline and verdict.

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
)

// Analyze computes every cell of a run with the default Options.
func Analyze(run *store.Run, samples []store.Sample) *Model {
	return Options{}.Analyze(run, samples)
}

// Analyze computes every cell of a run, its verdicts judged with o.
func (o Options) Analyze(run *store.Run, samples []store.Sample) *Model {
	m := &Model{Run: run, cells: map[cellKey]*Cell{}, Margin: o.margin()}
	ss := append([]store.Sample(nil), samples...)
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].Seq < ss[j].Seq })
	ss, retaken := splitRetaken(ss)
	m.ArmConditions = ArmConditions(ss)
	for _, s := range ss {
		if c := conditionsOf(s.Result); c != nil && c.IdleWakeup != nil {
			m.IdleWakeup = c.IdleWakeup
			break
		}
	}
	m.Paths = armPaths(ss)

	// Arms in the experiment's order, then any only the samples name.
	seen := map[string]bool{}
	for _, a := range run.Arms {
		if !seen[a.Name] {
			seen[a.Name] = true
			m.Arms = append(m.Arms, a.Name)
		}
	}
	groups := map[group]bool{}
	bySample := map[group]map[string][]store.Sample{}
	for _, s := range ss {
		if !seen[s.Arm] {
			seen[s.Arm] = true
			m.Arms = append(m.Arms, s.Arm)
		}
		g := group{s.Test, s.MsgSize}
		groups[g] = true
		if bySample[g] == nil {
			bySample[g] = map[string][]store.Sample{}
		}
		bySample[g][s.Arm] = append(bySample[g][s.Arm], s)
	}
	for g := range groups {
		m.Groups = append(m.Groups, g)
	}
	sortGroups(m.Groups)

	m.Shape = ShapeThroughput
	for _, g := range m.Groups {
		if g.Test != result.TCPBW && g.Test != result.UDPBW {
			m.Shape = ShapeLatency
		}
	}
	if len(m.Groups) == 0 {
		m.Shape = ShapeLatency
	}

	// Cells: every metric of every group, for every arm.
	tableMetric := map[group]map[string]bool{}
	for _, g := range m.Groups {
		tableMetric[g] = map[string]bool{}
		for _, mt := range m.tableMetrics(g.Test) {
			tableMetric[g][mt.Name] = true
		}
		for _, mt := range allMetrics(g.Test) {
			for _, arm := range m.Arms {
				c := m.analyzeCell(arm, g, mt, bySample[g][arm])
				m.cells[cellKey{arm, g.Test, g.Size, mt.Name}] = c
			}
		}
	}

	// Baseline: as named by the run, if it has samples.
	if run.Baseline != "" {
		for _, g := range m.Groups {
			if len(bySample[g][run.Baseline]) > 0 {
				m.Baseline = run.Baseline
			}
		}
	}
	if m.Baseline != "" && !o.cellsOnly {
		for k, c := range m.cells {
			if k.Arm == m.Baseline || len(c.Values) == 0 {
				continue
			}
			base := m.cells[cellKey{m.Baseline, k.Test, k.Size, k.Metric}]
			if base == nil || len(base.Values) == 0 {
				continue
			}
			r := stats.RatioOfMedians(c.Values, base.Values)
			v := o.judge(base.Values, c.Values, c.HigherIsBetter)
			c.Ratio, c.Verdict = &r, &v
		}
	}

	// Keep the cells worth reporting: those with values, and missing ones
	// that a table shows or that are the test's primary metric.
	for _, g := range m.Groups {
		for _, arm := range m.Arms {
			for _, mt := range allMetrics(g.Test) {
				c := m.cells[cellKey{arm, g.Test, g.Size, mt.Name}]
				if len(c.Values) > 0 || tableMetric[g][mt.Name] || mt.Name == primary(g.Test).Name {
					m.Keys = append(m.Keys, cellKey{arm, g.Test, g.Size, mt.Name})
				} else {
					delete(m.cells, cellKey{arm, g.Test, g.Size, mt.Name})
				}
			}
		}
	}

	m.buildColumns()
	m.Flags = append(runFlags(run, ss, m), conditionFlags(m, ss, retaken)...)
	m.Flags = append(m.Flags, precisionFlags(m)...)
	return m
}

func (m *Model) analyzeCell(arm string, g group, mt metric, samples []store.Sample) *Cell {
	c := &Cell{Arm: arm, Test: g.Test, Size: g.Size, Metric: mt.Name, Unit: mt.Unit, HigherIsBetter: mt.HigherIsBetter}
	reasons := map[string]bool{}
	var firstErr string
	var steal []float64
	var vals []sampleOf
	for _, s := range samples {
		if s.Result == nil {
			c.Failed++
			if firstErr == "" {
				firstErr = s.Error
			}
			continue
		}
		if v, ok := mt.Get(s.Result); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			vals = append(vals, sampleOf{v, s.Seq, s.Repeat, s.Result})
		} else {
			reasons[missingReason(s.Result, mt)] = true
		}
		if st, ok := stealOf(s.Result); ok {
			steal = append(steal, st)
		}
	}
	for _, v := range vals {
		c.Values = append(c.Values, v.v)
		c.Repeats = append(c.Repeats, v.rep)
	}
	if len(c.Values) == 0 {
		switch {
		case len(samples) == 0 && !m.Run.Complete:
			c.Missing = "not measured: the run stopped before this arm was measured"
		case len(samples) == 0:
			c.Missing = "not measured: no sample of this arm for this test and size"
		case c.Failed == len(samples):
			c.Missing = fmt.Sprintf("all %d samples failed: %s", c.Failed, firstErr)
		default:
			c.Missing = joinSorted(reasons)
		}
		return c
	}
	c.Summary = stats.Summarize(c.Values)
	if c.Modes = findModes(vals); c.Modes != nil {
		c.Flags = append(c.Flags, FlagModes)
	}
	if c.Summary.CV > NoisyCV {
		c.Flags = append(c.Flags, "noisy")
	}
	if len(steal) > 0 && stats.Mean(steal) > StealPct {
		c.Flags = append(c.Flags, "steal")
	}
	c.Flags = append(c.Flags, cellConditionFlags(g.Test, mt.Name == primary(g.Test).Name, c.Summary.Median, samples)...)
	if c.Failed > 0 {
		c.Flags = append(c.Flags, fmt.Sprintf("%d failed", c.Failed))
	}
	// CDF of the sample closest to the median: one real distribution,
	// not an average of distributions.
	best := math.Inf(1)
	for _, v := range vals {
		if d := math.Abs(v.v - c.Summary.Median); d < best && v.r.Latency != nil && len(v.r.Latency.CDF) > 0 {
			best, c.CDF = d, v.r.Latency.CDF
		}
	}
	return c
}

// missingReason explains why r lacks mt: the result's own reason when it
// gave one, otherwise which tool did not report it.
func missingReason(r *result.Result, mt metric) string {
	for _, p := range mt.missingPaths {
		if why, ok := r.Missing[p]; ok {
			return why
		}
	}
	// A reason recorded for a sub-field (e.g. cpu.server.process_pct when
	// the metric reads cpu.server) also explains it.
	for _, p := range mt.missingPaths {
		for _, k := range r.MissingPaths() {
			if strings.HasPrefix(k, p+".") {
				return r.Missing[k]
			}
		}
	}
	tool := r.Tool.Name
	if tool == "" {
		tool = "the engine"
	}
	return fmt.Sprintf("%s did not report %s", tool, mt.Label)
}

func joinSorted(set map[string]bool) string {
	var s []string
	for k := range set {
		s = append(s, k)
	}
	sort.Strings(s)
	return strings.Join(s, "; ")
}

// stealOf is the larger of the two sides' steal time in one result.
func stealOf(r *result.Result) (float64, bool) {
	if r.CPU == nil {
		return 0, false
	}
	v, ok := math.Inf(-1), false
	for _, side := range []*result.CPUSide{r.CPU.Client, r.CPU.Server} {
		if side != nil && side.StealPct != nil {
			v, ok = math.Max(v, *side.StealPct), true
		}
	}
	return v, ok
}

// MedianCV is the median coefficient of variation over the table's cells
// with at least two values, and how many cells that is: one figure for
// "how noisy was this run" (issue 4's target for the default experiment is
// ≤ 5%). NaN when no cell has two values.
func (m *Model) MedianCV() (float64, int) {
	var cvs []float64
	for _, col := range m.Columns {
		for _, arm := range m.Arms {
			if c := m.cell(arm, col); c != nil && c.Summary.N >= 2 && !math.IsNaN(c.Summary.CV) {
				cvs = append(cvs, c.Summary.CV)
			}
		}
	}
	return stats.Median(cvs), len(cvs)
}
