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

// Outcome is what a verdict decided: one of four answers.
type Outcome int

// Outcomes of a Verdict.
const (
	// Undecided: neither a significant difference nor equivalence within
	// the margin; more samples may decide it (Verdict.MoreSamples).
	Undecided Outcome = iota
	// OutcomeBetter and OutcomeWorse: the Mann–Whitney test found a
	// difference (p < Alpha) and the difference is not shown to be within
	// the margin.
	OutcomeBetter
	OutcomeWorse
	// Equivalent: the EquivLevel interval of the ratio lies within
	// 1 ± margin (two one-sided tests), whatever the Mann–Whitney test
	// says: a significant 1% is still equivalent within ±5%.
	Equivalent
)

// String names the outcome as the JSON documents do.
func (o Outcome) String() string {
	switch o {
	case OutcomeBetter:
		return "better"
	case OutcomeWorse:
		return "worse"
	case Equivalent:
		return "equivalent"
	}
	return "undecided"
}

// Verdict says whether arm B differs from arm A, and which way.
type Verdict struct {
	MedianA, MedianB float64
	// DeltaPct is (median B - median A) / |median A| × 100.
	DeltaPct float64
	Test     MWResult
	// Direction is the Mann–Whitney test's answer alone, which the
	// regression gate reads; Outcome adds the equivalence test.
	Direction Direction
	// Note explains a verdict that could not be significant, e.g. too few
	// samples for the exact test to reach Alpha.
	Note string

	// Margin is the equivalence margin (0.05 = ±5%).
	Margin float64
	// Ratio is B relative to A with its EquivLevel interval (RatioOfLocations).
	Ratio   RatioCI
	Outcome Outcome
	// MoreSamples estimates, for an undecided verdict, how many more
	// samples per arm would decide it; -1 when there is no estimate, 0 for
	// a decided verdict.
	MoreSamples int
}

// Judge is JudgeWithin at DefaultMargin.
func Judge(a, b []float64, higherIsBetter bool) Verdict {
	return JudgeWithin(a, b, higherIsBetter, DefaultMargin)
}

// JudgeWithin compares B against A: a two-sided Mann–Whitney test at
// Alpha says whether they differ and which way, and two one-sided tests
// (the EquivLevel interval of the ratio inside 1 ± margin) whether they
// are equivalent. higherIsBetter is the metric's direction (true for
// throughput, false for latency and CPU cost).
func JudgeWithin(a, b []float64, higherIsBetter bool, margin float64) Verdict {
	v := Verdict{MedianA: Median(a), MedianB: Median(b), Test: MannWhitney(a, b), Margin: margin}
	v.judgeDirection(a, b, higherIsBetter)
	v.Ratio = RatioOfLocations(a, b, EquivLevel)
	switch {
	case len(a) == 0 || len(b) == 0:
		v.MoreSamples = -1
	case WithinMargin(v.Ratio.CI, margin):
		v.Outcome = Equivalent
	case v.Direction == Better:
		v.Outcome = OutcomeBetter
	case v.Direction == Worse:
		v.Outcome = OutcomeWorse
	default:
		v.MoreSamples = moreSamples(v.Ratio, len(a), len(b), margin)
	}
	return v
}

// judgeDirection sets the Mann–Whitney direction and the note on samples
// too few to reach Alpha.
func (v *Verdict) judgeDirection(a, b []float64, higherIsBetter bool) {
	v.DeltaPct = (v.MedianB - v.MedianA) / math.Abs(v.MedianA) * 100
	if v.MedianA == 0 {
		v.DeltaPct = math.NaN()
	}
	switch {
	case len(a) == 0 || len(b) == 0:
		v.Note = "no samples in one arm"
		return
	case MinP(len(a), len(b)) > Alpha:
		v.Note = fmt.Sprintf("%d+%d repeats cannot reach p<%.2g", len(a), len(b), Alpha)
	}
	if v.Test.P >= Alpha || math.IsNaN(v.Test.P) {
		return
	}
	// U1 > U2 means A's values tend to be larger than B's.
	bHigher := v.Test.U2 > v.Test.U1
	if bHigher == higherIsBetter {
		v.Direction = Better
	} else {
		v.Direction = Worse
	}
}

// Significant reports whether the difference is significant at Alpha.
func (v Verdict) Significant() bool { return v.Direction != NoDifference }

// Text renders the verdict in full with the given words for "better" and
// "worse", e.g. Text("faster", "slower") = "faster by 12.3% (p=0.008)",
// "equivalent within ±5% (90% CI -1.2% to +2.0%)" or "undecided (p=0.42;
// 90% CI -3.1% to +8.0%; ≈12 more samples per arm would decide it, an
// estimate)".
func (v Verdict) Text(better, worse string) string {
	p := PText(v.Test.P)
	var s string
	switch v.Outcome {
	case OutcomeBetter:
		return fmt.Sprintf("%s by %.1f%% (%s)", better, math.Abs(v.DeltaPct), p)
	case OutcomeWorse:
		return fmt.Sprintf("%s by %.1f%% (%s)", worse, math.Abs(v.DeltaPct), p)
	case Equivalent:
		s = fmt.Sprintf("equivalent within %s (%s", MarginText(v.Margin), v.ciText())
		if v.Direction != NoDifference {
			word := better
			if v.Direction == Worse {
				word = worse
			}
			s += fmt.Sprintf("; %s by %.1f%%, %s", word, math.Abs(v.DeltaPct), p)
		}
		return s + ")"
	}
	s = "undecided (" + p
	if v.Ratio.CI.Level > 0 {
		s += "; " + v.ciText()
	}
	if m := v.moreText(); m != "" {
		s += "; " + m
	}
	if v.Note != "" {
		s += "; " + v.Note
	}
	return s + ")"
}

// Short is the verdict as a table cell: "faster 12.3% (p=0.008)",
// "equivalent ±5%" or "undecided (≈12 more)".
func (v Verdict) Short(better, worse string) string {
	switch v.Outcome {
	case OutcomeBetter:
		return fmt.Sprintf("%s %.1f%% (%s)", better, math.Abs(v.DeltaPct), PText(v.Test.P))
	case OutcomeWorse:
		return fmt.Sprintf("%s %.1f%% (%s)", worse, math.Abs(v.DeltaPct), PText(v.Test.P))
	case Equivalent:
		return "equivalent " + MarginText(v.Margin)
	}
	if v.MoreSamples > 0 {
		return fmt.Sprintf("undecided (≈%d more)", v.MoreSamples)
	}
	return "undecided"
}

// Phrase is the verdict as a report's one-line answer says it: "slower
// 35.1% (p=0.0022)", "equivalent within ±5%", "undecided (≈12 more
// samples per arm)".
func (v Verdict) Phrase(better, worse string) string {
	switch v.Outcome {
	case Equivalent:
		return "equivalent within " + MarginText(v.Margin)
	case Undecided:
		switch {
		case v.MoreSamples == 1:
			return "undecided (≈1 more sample per arm)"
		case v.MoreSamples > 1:
			return fmt.Sprintf("undecided (≈%d more samples per arm)", v.MoreSamples)
		}
		return "undecided"
	}
	return v.Short(better, worse)
}

// ciText is the ratio interval as changes: "90% CI -1.2% to +2.0%".
func (v Verdict) ciText() string {
	return fmt.Sprintf("%.0f%% CI %+.1f%% to %+.1f%%", v.Ratio.CI.Level*100, (v.Ratio.CI.Low-1)*100, (v.Ratio.CI.High-1)*100)
}

// moreText says how many more samples would decide an undecided verdict.
func (v Verdict) moreText() string {
	switch {
	case v.MoreSamples == 1:
		return "≈1 more sample per arm would decide it (an estimate)"
	case v.MoreSamples > 1:
		return fmt.Sprintf("≈%d more samples per arm would decide it (an estimate)", v.MoreSamples)
	case v.Ratio.CI.Level == 0:
		return "too few samples for a 90% interval"
	}
	return fmt.Sprintf("the change sits on the ±%g%% margin: no number of samples in reach decides it", v.Margin*100)
}

// MarginText is a margin as the verdicts print it: "±5%".
func MarginText(m float64) string { return fmt.Sprintf("±%g%%", m*100) }

// String is Text("faster", "slower").
func (v Verdict) String() string { return v.Text("faster", "slower") }

// PText is a p-value as a verdict says it: "p=0.0079", or "p<0.001".
func PText(p float64) string {
	if f := FormatP(p); f != "<0.001" {
		return "p=" + f
	}
	return "p<0.001"
}

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
