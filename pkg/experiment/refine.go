package experiment

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/stats"
)

// Precision-driven runs.
//
// After the experiment's fixed rounds, each further round measures, for
// every (test, size) in the file's order, the arms whose median is still
// known less precisely than the target: the 95% order-statistic interval of
// the median (stats.MedianCI, what the report prints) is wider than
// ±Precision of the median. The arms of a round are rotated as in Plan, so
// drift keeps landing on every arm alike. Rounds stop when every cell meets
// the target, when the next round would not fit in the budget, or at
// MaxRepeats samples per cell.
//
// The rule looks at each cell's own spread only, never at a comparison
// between arms: it stops on precision, not on significance. Stopping when
// p < 0.05 ("peeking") inflates false positives, because a run could stop at
// a chance low of the p-value; a cell's interval width does not depend on
// the difference being tested, so the Mann–Whitney verdicts keep their
// error rate. What the rule does change is that noisy cells get more
// samples than quiet ones, which is the point. The reported intervals are
// computed on all samples as usual; a simulation of the rule on skewed
// noisy data (TestPrecisionRuleCoverage) keeps their coverage near 95%.

// precisionOutcome is how a precision-driven run ended.
type precisionOutcome struct {
	target      float64
	rounds      int
	cells       int
	reached     int
	missed      []string // "arm test size (±x%, n=N)"
	stopped     string   // why the rounds stopped
	interrupted int      // steps of a round cut short by the context
}

func (p *precisionOutcome) String() string {
	s := fmt.Sprintf("precision ±%.3g%% reached by %d of %d cells after %d extra rounds (%s)",
		p.target*100, p.reached, p.cells, p.rounds, p.stopped)
	if len(p.missed) > 0 {
		// The report lists every cell (flag "n=N >±P"); the status stays
		// a line.
		m := p.missed
		if len(m) > 4 {
			m = append(m[:4:4], fmt.Sprintf("… %d more", len(p.missed)-4))
		}
		s += "; not reached: " + strings.Join(m, ", ")
	}
	return s
}

// relHalfWidth is a cell's precision: the half-width of its median's 95%
// interval relative to the median; +Inf when it cannot be told (fewer than
// two values, a zero median).
func relHalfWidth(v []float64) float64 {
	if len(v) < 2 {
		return math.Inf(1)
	}
	m := stats.Median(v)
	if m == 0 || math.IsNaN(m) {
		return math.Inf(1)
	}
	return stats.MedianCI(v, 0.95).HalfWidth(m) / math.Abs(m)
}

// refine runs the extra rounds. start is when the run's first step began.
func (x *executor) refine(start time.Time) (*precisionOutcome, error) {
	e := x.e
	out := &precisionOutcome{target: float64(e.Precision)}
	budget := time.Duration(e.Budget)
	cells := x.cells()
	out.cells = len(cells)
	for round := e.Repeats; ; round++ {
		open := x.imprecise(cells)
		if len(open) == 0 {
			out.stopped = "all cells reached it"
			break
		}
		if x.done > 0 {
			per := time.Since(start) / time.Duration(x.done)
			left := int((budget - time.Since(start)) / max(per, 1))
			open = triage(open, x.need(open), left)
		}
		var steps []Step
		for _, c := range open {
			steps = append(steps, Step{Repeat: round, Arm: c.arm, Test: c.test, MsgSize: c.size})
		}
		if round >= MaxRepeats {
			out.stopped = fmt.Sprintf("%d samples per cell is the limit", MaxRepeats)
			break
		}
		// The measured pace, not the estimate, decides whether a round fits.
		per := time.Since(start) / time.Duration(max(1, x.done))
		if time.Since(start)+time.Duration(len(steps))*per > budget {
			out.stopped = fmt.Sprintf("budget %v spent", budget)
			break
		}
		steps = rotate(steps, round)
		for i := range steps {
			steps[i].Seq = x.done + i
		}
		x.prog.beginPhase(fmt.Sprintf("precision round %d", out.rounds+1), x.done, len(steps), x.stillOpen(cells, open))
		before := x.done
		if err := x.run(steps); err != nil {
			return out, err
		}
		if x.ctx.Err() != nil {
			out.interrupted = len(steps) - (x.done - before)
			out.stopped = "interrupted"
			break
		}
		n, err := x.retakeDisturbed(start)
		if err != nil {
			return out, err
		}
		if x.ctx.Err() != nil {
			out.interrupted = n - (x.done - before - len(steps))
			out.stopped = "interrupted"
			break
		}
		out.rounds++
	}
	for _, c := range cells {
		if w := relHalfWidth(x.values[c]); w <= out.target {
			out.reached++
		} else {
			a := e.Arms[c.arm].Name
			wt := "±?"
			if !math.IsInf(w, 1) {
				wt = fmt.Sprintf("±%.3g%%", w*100)
			}
			out.missed = append(out.missed, fmt.Sprintf("%s %s %dB (%s, n=%d)", a, c.test, c.size, wt, len(x.values[c])))
		}
	}
	return out, nil
}

// stillOpen says which cells a precision round measures and why: how many
// of all cells are still wider than the target, the widest few named.
func (x *executor) stillOpen(cells, open []cellKey) string {
	wide := x.imprecise(cells)
	sort.SliceStable(wide, func(i, j int) bool { return relHalfWidth(x.values[wide[i]]) > relHalfWidth(x.values[wide[j]]) })
	var names []string
	for i, c := range wide {
		if i == 3 {
			names = append(names, fmt.Sprintf("… %d more", len(wide)-3))
			break
		}
		w := "±?"
		if rw := relHalfWidth(x.values[c]); !math.IsInf(rw, 1) {
			w = fmt.Sprintf("±%.1f%%", rw*100)
		}
		names = append(names, fmt.Sprintf("%s %s %dB %s", x.e.Arms[c.arm].Name, c.test, c.size, w))
	}
	s := fmt.Sprintf("%d of %d cells wider than ±%.3g%% (%s)", len(wide), len(cells), float64(x.e.Precision)*100, strings.Join(names, ", "))
	if len(open) < len(wide) {
		s += fmt.Sprintf("; the budget fits %d of them", len(open))
	}
	return s
}

// cells lists the run's cells in plan order: (test, size) as in the file,
// arms within each.
func (x *executor) cells() []cellKey {
	e := x.e
	var out []cellKey
	for _, t := range e.Tests {
		for _, s := range e.Sizes(t) {
			for i := range e.Arms {
				if contains(e.ArmTests(&e.Arms[i]), t) {
					out = append(out, cellKey{i, t, int(s)})
				}
			}
		}
	}
	return out
}

// imprecise returns the cells that still miss the target. A cell with no
// value at all (its every step failed) is left alone: more rounds would
// fail the same way.
func (x *executor) imprecise(cells []cellKey) []cellKey {
	var out []cellKey
	for _, c := range cells {
		v := x.values[c]
		if len(v) == 0 {
			continue
		}
		if relHalfWidth(v) > float64(x.e.Precision) {
			out = append(out, c)
		}
	}
	return out
}

// rotate shifts the arm order inside each (test, size) group by round, as
// Plan does, so no arm always runs first.
func rotate(steps []Step, round int) []Step {
	var out []Step
	for i := 0; i < len(steps); {
		j := i
		for j < len(steps) && steps[j].Test == steps[i].Test && steps[j].MsgSize == steps[i].MsgSize {
			j++
		}
		g := steps[i:j]
		k := round % len(g)
		out = append(out, g[k:]...)
		out = append(out, g[:k]...)
		i = j
	}
	return out
}

// need estimates how many more samples each cell needs to reach the
// target: a median's interval narrows about as 1/√n, so n·(w/P)² in all.
// A cell whose width cannot be told yet needs as many again as it has.
func (x *executor) need(cells []cellKey) map[cellKey]int {
	p := float64(x.e.Precision)
	out := map[cellKey]int{}
	for _, c := range cells {
		v := x.values[c]
		w := relHalfWidth(v)
		if math.IsInf(w, 1) || math.IsNaN(w) {
			out[c] = max(1, len(v))
			continue
		}
		out[c] = max(1, int(math.Ceil(float64(len(v))*(w/p)*(w/p)))-len(v))
	}
	return out
}

// triage picks the cells to measure in the next round when the budget
// cannot give every imprecise cell what it needs: the cells that need the
// fewest samples, as many of them as can each get their need from the
// steps left if only they are measured. More cells then reach the target
// than if every cell got an equal share and none got enough. When no cell
// can make it, every cell goes on (more samples still narrow each
// interval). Which cells are measured depends only on their widths, never
// on a comparison between arms, so the stopping rule stays one on
// precision, not on significance.
func triage(cells []cellKey, need map[cellKey]int, stepsLeft int) []cellKey {
	sorted := append([]cellKey(nil), cells...)
	sort.SliceStable(sorted, func(i, j int) bool { return need[sorted[i]] < need[sorted[j]] })
	k := len(sorted)
	for k > 0 && need[sorted[k-1]]*k > stepsLeft {
		k--
	}
	if k == 0 {
		return cells
	}
	keep := map[cellKey]bool{}
	for _, c := range sorted[:k] {
		keep[c] = true
	}
	var out []cellKey // in plan order, so rotate still groups by cell
	for _, c := range cells {
		if keep[c] {
			out = append(out, c)
		}
	}
	return out
}
