package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/stats"
)

// Options are the choices a report or a comparison is judged with; the
// zero value is the default everywhere. `cnibench report` and `compare`
// set them from their flags; a runner that prints its run's report
// (`cnibench run`) passes its own the same way.
type Options struct {
	// Margin is the equivalence margin of every verdict, a fraction: 0.05
	// says two arms within ±5% of each other are equivalent. 0 means
	// stats.DefaultMargin.
	Margin float64

	// Relative makes a comparison judge each arm's ratio to its own run's
	// baseline, round by round, instead of its absolute values: a machine
	// whose speed drifts between runs moves every arm of a run alike, and
	// the ratio cancels that (compare --relative; relative.go).
	Relative bool

	// cellsOnly skips the verdicts and ratios against the baseline: a
	// history plots each run's cells and never reads them, and they were
	// two thirds of analysing a run.
	cellsOnly bool
}

// margin is the margin in force.
func (o Options) margin() float64 {
	if o.Margin == 0 {
		return stats.DefaultMargin
	}
	return o.Margin
}

// judge compares b against a as every verdict of a report does.
func (o Options) judge(a, b []float64, higherIsBetter bool) stats.Verdict {
	return stats.JudgeWithin(a, b, higherIsBetter, o.margin())
}

// ParseMargin reads --margin: a percentage with or without its "%" ("5%",
// "2.5"), more than 0 and less than 100, as a fraction.
func ParseMargin(s string) (float64, error) {
	t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0 && v < 100) {
		return 0, fmt.Errorf("--margin %q: want a percentage above 0 and below 100, e.g. 5%%", s)
	}
	return v / 100, nil
}
