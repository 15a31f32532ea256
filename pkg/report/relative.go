package report

import (
	"fmt"
	"slices"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/stats"
)

// compare --relative: "does the run give the same answer later?" On a
// machine whose speed drifts between runs (a shared VM's host), every arm
// of a later run is faster or slower alike, and a comparison of absolute
// values finds differences that are the machine's, not the datapaths'
// (docs/reports.md, "The same answer later?"). An interleaved run
// measures each arm once per round, so an arm's value over the baseline's
// value of the same round is a ratio the drift cancels from; comparing
// those per-round ratios between two runs asks whether the answer — how
// each datapath stands against the baseline — moved.

// RelativeUnit is the unit of a relative comparison's values.
const RelativeUnit = "ratio"

// checkRelative refuses a relative comparison the runs cannot support.
func checkRelative(mA, mB *Model) error {
	switch {
	case mA.Baseline == "" || mB.Baseline == "":
		return errkind.Errorf(ErrInvalid, "--relative needs a baseline arm with samples in both runs (run %q: %q, run %q: %q); compare absolute values without --relative",
			mA.Run.Name, mA.Baseline, mB.Run.Name, mB.Baseline)
	case mA.Baseline != mB.Baseline:
		return errkind.Errorf(ErrInvalid, "--relative: the runs have different baselines (%q, %q); compare runs of the same experiment", mA.Baseline, mB.Baseline)
	}
	return nil
}

// relativeCell is c as ratios to the run's baseline, round by round: for
// each repeat measured in both, c's value over the baseline's. A repeat
// measured twice (a retaken sample) counts with its last value, as the
// run's report does. nil with the reason when fewer than two rounds have
// both (no interval without two).
func (m *Model) relativeCell(c *Cell) (*Cell, string) {
	if c == nil || len(c.Values) == 0 {
		return nil, ""
	}
	base := m.cells[cellKey{m.Baseline, c.Test, c.Size, c.Metric}]
	if base == nil || len(base.Values) == 0 {
		return nil, fmt.Sprintf("the baseline %s has no value for this cell", m.Baseline)
	}
	last := func(c *Cell) map[int]float64 {
		by := map[int]float64{}
		for i, v := range c.Values {
			by[c.Repeats[i]] = v
		}
		return by
	}
	mine, theirs := last(c), last(base)
	reps := make([]int, 0, len(mine))
	for r := range mine {
		reps = append(reps, r)
	}
	slices.Sort(reps)
	r := &Cell{Arm: c.Arm, Test: c.Test, Size: c.Size, Metric: c.Metric, Unit: RelativeUnit, HigherIsBetter: c.HigherIsBetter}
	for _, rep := range reps {
		if b, ok := theirs[rep]; ok && b != 0 {
			r.Values = append(r.Values, mine[rep]/b)
			r.Repeats = append(r.Repeats, rep)
		}
	}
	if len(r.Values) < 2 {
		return nil, fmt.Sprintf("%d round(s) measured both %s and the baseline %s; a ratio's interval needs 2", len(r.Values), c.Arm, m.Baseline)
	}
	r.Summary = stats.Summarize(r.Values)
	if r.Summary.CV > NoisyCV {
		r.Flags = append(r.Flags, "noisy")
	}
	return r, ""
}
