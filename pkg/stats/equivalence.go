package stats

import (
	"math"
	"sort"
	"sync"
)

// DefaultMargin is the equivalence margin verdicts use unless told
// otherwise: two arms whose ratio is shown to lie within 1 ± 5% are
// "equivalent".
const DefaultMargin = 0.05

// EquivLevel is the confidence level of the interval the equivalence test
// reads. Two one-sided tests at α = 0.05 each (TOST) reject "B is more
// than M slower" and "B is more than M faster" exactly when the
// (1 − 2α) = 90% interval lies inside ±M.
const EquivLevel = 0.90

// Scales of a RatioCI.
const (
	// ScaleLog is the interval of the shift of log(values), turned back
	// into a ratio: used when every value is positive (latency, rates).
	ScaleLog = "log"
	// ScaleShift is the interval of the shift of the values themselves,
	// divided by |median A|: used when a value is 0 or negative (a loss of
	// 0%), where a logarithm is undefined.
	ScaleShift = "shift"
)

// RatioCI is a confidence interval of B relative to A, as a ratio (1.05 =
// B is 5% higher).
type RatioCI struct {
	// Estimate is the Hodges–Lehmann estimate: exp(median of the pairwise
	// differences log b − log a), or 1 + median(b − a)/|median A|.
	Estimate float64
	// CI is the interval, Level its achieved coverage (0 and NaN bounds
	// when the samples are too few for the level asked).
	CI    CI
	Scale string
}

// ShiftCI is the distribution-free confidence interval of the shift Δ in
// "B is distributed as A + Δ", the interval that inverts the Mann–Whitney
// test (Moses 1953; Hollander & Wolfe, Nonparametric Statistical Methods,
// §4.3): with the n₁·n₂ differences b_j − a_i sorted as D(1) ≤ … ≤ D(n₁n₂),
// the interval is [D(k), D(n₁n₂+1−k)] for the largest k with
// P(U ≤ k−1) ≤ (1−level)/2 under the null. It holds every Δ the
// two-sided Mann–Whitney test at 1−level would not reject, so it agrees
// with the verdicts' test, and its coverage is exact for any continuous
// distribution, not only normal ones. est is the Hodges–Lehmann estimate,
// the median of the differences. Level is the achieved coverage, 0 (with
// NaN bounds) when even [D(1), D(n₁n₂)] falls short of level.
func ShiftCI(a, b []float64, level float64) (est float64, ci CI) {
	nan := math.NaN()
	if len(a) == 0 || len(b) == 0 {
		return nan, CI{nan, nan, 0}
	}
	d := make([]float64, 0, len(a)*len(b))
	for _, y := range b {
		for _, x := range a {
			d = append(d, y-x)
		}
	}
	sort.Float64s(d)
	est = medianSorted(d)
	k, cov := shiftRank(len(a), len(b), level)
	if k == 0 {
		return est, CI{nan, nan, 0}
	}
	return est, CI{Low: d[k-1], High: d[len(d)-k], Level: cov}
}

// shiftRank is k of ShiftCI and the coverage 1 − 2·P(U ≤ k−1) it
// achieves; 0 when no k reaches level. Exact (the no-ties U
// distribution) up to maxExactN values, the normal approximation with
// continuity correction above.
func shiftRank(n1, n2 int, level float64) (int, float64) {
	key := [3]float64{float64(n1), float64(n2), level}
	if v, ok := shiftRanks.Load(key); ok {
		r := v.([2]float64)
		return int(r[0]), r[1]
	}
	tail := (1 - level) / 2
	cdf := func(u int) float64 { return exactUCDF(n1, n2, float64(u)) }
	if n1+n2 > maxExactN {
		mu := float64(n1*n2) / 2
		sigma := math.Sqrt(float64(n1*n2) * float64(n1+n2+1) / 12)
		cdf = func(u int) float64 { return NormalCDF((float64(u) + 0.5 - mu) / sigma) }
	}
	k, cov := 0, 0.0
	// P(U ≤ k−1) grows with k; the interval needs k ≤ n₁n₂/2.
	for c := 1; 2*c <= n1*n2+1; c++ {
		p := cdf(c - 1)
		if p > tail+1e-12 {
			break
		}
		k, cov = c, 1-2*p
	}
	shiftRanks.Store(key, [2]float64{float64(k), cov})
	return k, cov
}

// shiftRanks memoizes shiftRank: a report asks for the same few sample
// sizes for every cell, and the exact U distribution costs O(n₁²n₂²).
var shiftRanks sync.Map

// RatioOfLocations is the confidence interval at level of B's location
// relative to A's, as a ratio: the ShiftCI of the logarithms when every
// value is positive (a ratio model: "B is A × r"), otherwise the ShiftCI
// of the values divided by |median A| (NaN when that median is 0 and the
// values differ).
func RatioOfLocations(a, b []float64, level float64) RatioCI {
	positive := len(a) > 0 && len(b) > 0
	for _, x := range append(append([]float64(nil), a...), b...) {
		if !(x > 0) {
			positive = false
			break
		}
	}
	if positive {
		est, ci := ShiftCI(logs(a), logs(b), level)
		return RatioCI{Estimate: math.Exp(est), CI: CI{math.Exp(ci.Low), math.Exp(ci.High), ci.Level}, Scale: ScaleLog}
	}
	est, ci := ShiftCI(a, b, level)
	ma := math.Abs(Median(a))
	rel := func(v float64) float64 {
		if v == 0 { // no shift at all is no change, even against a median of 0
			return 1
		}
		return 1 + v/ma
	}
	return RatioCI{Estimate: rel(est), CI: CI{rel(ci.Low), rel(ci.High), ci.Level}, Scale: ScaleShift}
}

func logs(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = math.Log(v)
	}
	return out
}

// WithinMargin reports whether a ratio interval lies inside 1 ± margin:
// both one-sided tests of TOST reject a change larger than the margin.
func WithinMargin(ci CI, margin float64) bool {
	return ci.Level > 0 && ci.Low >= 1-margin && ci.High <= 1+margin
}

// zRatio converts a 90% half-width into a 95% one (normal quantiles
// 1.645 and 1.960): the Mann–Whitney test at α = 0.05 separates the arms
// about when the 95% interval of the shift excludes 0.
var zRatio = 1.959963984540054 / 1.6448536269514722

// maxMoreSamples bounds the estimate of MoreSamples; beyond it the answer
// is "out of reach" (the change sits on the margin).
const maxMoreSamples = 10000

// moreSamples estimates how many more samples per arm would decide an
// undecided comparison, from how a rank interval's half-width shrinks:
// as √(1/n₁ + 1/n₂). ci is the EquivLevel ratio interval of na and nb
// samples; the centre is assumed to stay where it is. Deciding is either
// the interval shrinking inside ±margin (equivalent) or the 95% interval
// excluding 1 with enough samples for the exact test to reach Alpha
// (faster or slower), whichever takes fewer samples. -1: no estimate (no
// interval yet, or more than maxMoreSamples).
func moreSamples(ci RatioCI, na, nb int, margin float64) int {
	if ci.CI.Level == 0 || na == 0 || nb == 0 {
		return -1
	}
	// Work on the interval's own scale: log ratio, or relative shift.
	f := func(r float64) float64 { return r - 1 }
	if ci.Scale == ScaleLog {
		f = math.Log
	}
	lo, hi := f(ci.CI.Low), f(ci.CI.High)
	c, h := (lo+hi)/2, (hi-lo)/2
	best := -1
	// The half-width after k more samples per arm shrinks monotonically
	// in k, so the fewest that reach a target are found by bisection.
	shrink := func(k int) float64 {
		return math.Sqrt((1/float64(na+k) + 1/float64(nb+k)) / (1/float64(na) + 1/float64(nb)))
	}
	try := func(target float64, minP bool) {
		if target <= 0 || h*shrink(maxMoreSamples) > target {
			return
		}
		lo, hi := 0, maxMoreSamples // h·shrink(hi) reaches the target, h·shrink(lo) may not
		for lo < hi-1 {
			mid := (lo + hi) / 2
			if h*shrink(mid) <= target {
				hi = mid
			} else {
				lo = mid
			}
		}
		k := hi
		if h <= target {
			k = 1
		}
		for minP && MinP(na+k, nb+k) > Alpha && k < maxMoreSamples {
			k++ // a few at most: 4+4 samples already reach p = 0.029
		}
		if best < 0 || k < best {
			best = k
		}
	}
	try(math.Min(c-f(1-margin), f(1+margin)-c), false)
	try(math.Abs(c)/zRatio, true)
	return best
}
