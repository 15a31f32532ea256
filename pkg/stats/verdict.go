package stats

import (
	"fmt"
	"math"
)

// Alpha is the significance level verdicts use.
const Alpha = 0.05

// Direction is which way a significant difference goes for the user.
type Direction int

// Directions of a Verdict.
const (
	NoDifference Direction = iota // not significant at Alpha
	Better                        // B is better than A (faster, higher throughput, lower cost)
	Worse                         // B is worse than A
)

// String names the direction as the JSON report does.
func (d Direction) String() string {
	switch d {
	case Better:
		return "better"
	case Worse:
		return "worse"
	}
	return "no significant difference"
}

// Verdict says whether arm B differs from arm A, and which way.
type Verdict struct {
	MedianA, MedianB float64
	// DeltaPct is (median B - median A) / |median A| × 100.
	DeltaPct  float64
	Test      MWResult
	Direction Direction
	// Note explains a verdict that could not be significant, e.g. too few
	// samples for the exact test to reach Alpha.
	Note string
}

// Judge compares B against A with a two-sided Mann–Whitney test at Alpha.
// higherIsBetter is the metric's direction (true for throughput, false for
// latency and CPU cost).
func Judge(a, b []float64, higherIsBetter bool) Verdict {
	v := Verdict{MedianA: Median(a), MedianB: Median(b), Test: MannWhitney(a, b)}
	v.DeltaPct = (v.MedianB - v.MedianA) / math.Abs(v.MedianA) * 100
	if v.MedianA == 0 {
		v.DeltaPct = math.NaN()
	}
	switch {
	case len(a) == 0 || len(b) == 0:
		v.Note = "no samples in one arm"
		return v
	case MinP(len(a), len(b)) > Alpha:
		v.Note = fmt.Sprintf("%d+%d repeats cannot reach p<%.2g", len(a), len(b), Alpha)
	}
	if v.Test.P >= Alpha || math.IsNaN(v.Test.P) {
		return v
	}
	// U1 > U2 means A's values tend to be larger than B's.
	bHigher := v.Test.U2 > v.Test.U1
	if bHigher == higherIsBetter {
		v.Direction = Better
	} else {
		v.Direction = Worse
	}
	return v
}

// Significant reports whether the difference is significant at Alpha.
func (v Verdict) Significant() bool { return v.Direction != NoDifference }

// Text renders the verdict with the given words for "better" and "worse",
// e.g. Text("faster", "slower") = "faster by 12.3% (p=0.008)" or
// "no significant difference (p=0.42)".
func (v Verdict) Text(better, worse string) string {
	p := FormatP(v.Test.P)
	switch v.Direction {
	case Better:
		return fmt.Sprintf("%s by %.1f%% (p=%s)", better, math.Abs(v.DeltaPct), p)
	case Worse:
		return fmt.Sprintf("%s by %.1f%% (p=%s)", worse, math.Abs(v.DeltaPct), p)
	}
	s := "no significant difference (p=" + p + ")"
	if v.Note != "" {
		s += "; " + v.Note
	}
	return s
}

// String is Text("faster", "slower").
func (v Verdict) String() string { return v.Text("faster", "slower") }

// FormatP prints a p-value with two significant digits, "<0.001" below that.
func FormatP(p float64) string {
	switch {
	case math.IsNaN(p):
		return "n/a"
	case p < 0.001:
		return "<0.001"
	}
	return fmt.Sprintf("%.2g", p)
}
