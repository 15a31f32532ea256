// Package stats holds the statistics that decide whether one datapath is
// faster than another: location and spread of repeated measurements,
// confidence intervals, ratios to a baseline and a significance test.
//
// Everything here is deterministic, so the same samples always give the
// same report: the bootstrap is computed exactly for benchmark-sized cells
// and from a fixed seed for large ones.
//
// Choices, and why:
//   - The median is the headline figure: a benchmark repeat hit by a noisy
//     neighbour moves the mean but not the median.
//   - The median's 95% CI is the distribution-free binomial order-statistic
//     interval (no seed, no normality assumption). With few repeats it cannot
//     reach 95% exactly; the achieved coverage is reported (n=5: 93.75%).
//   - The mean's CI uses Student's t, the textbook interval for small n.
//   - A ratio to the baseline gets a percentile-bootstrap CI of the ratio of
//     medians, because the ratio of two medians has no simple closed form.
//     For up to 30 repeats the bootstrap distribution is computed exactly
//     (no resampling noise, no seed); beyond that 2000 resamples from a
//     fixed seed.
//   - Two arms are compared with the Mann–Whitney U test: it makes no
//     normality assumption and is exact for small samples.
//   - Equivalence within a margin is two one-sided tests on the interval
//     that inverts the same Mann–Whitney test (the Hodges–Lehmann shift
//     interval of the logarithms: a ratio B/A): distribution-free, exact
//     coverage for small samples, and coherent with the difference test —
//     the 95% interval excludes no change exactly when p ≤ 0.05.
package stats

import (
	"math"
	"sort"
	"sync"
)

// CI is a confidence interval. Level is the coverage actually achieved,
// which for order-statistic intervals may differ from the one asked for.
type CI struct {
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	Level float64 `json:"level"`
}

// HalfWidth is the larger distance from center to either end, so "center ±
// HalfWidth" never understates an asymmetric interval.
func (c CI) HalfWidth(center float64) float64 {
	return math.Max(center-c.Low, c.High-center)
}

// Summary describes one cell's repeated measurements.
type Summary struct {
	N        int     `json:"n"`
	Median   float64 `json:"median"`
	Mean     float64 `json:"mean"`
	Stddev   float64 `json:"stddev"` // sample standard deviation (n-1); NaN when n < 2
	CV       float64 `json:"cv"`     // Stddev/|Mean|; NaN when undefined
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	MedianCI CI      `json:"median_ci"`
	MeanCI   CI      `json:"mean_ci"`
}

// Summarize computes a Summary with 95% intervals. x is not modified.
func Summarize(x []float64) Summary {
	s := sorted(x)
	n := len(s)
	if n == 0 {
		nan := math.NaN()
		return Summary{Median: nan, Mean: nan, Stddev: nan, CV: nan, Min: nan, Max: nan,
			MedianCI: CI{nan, nan, 0}, MeanCI: CI{nan, nan, 0}}
	}
	return Summary{
		N:        n,
		Median:   medianSorted(s),
		Mean:     Mean(s),
		Stddev:   Stddev(s),
		CV:       CV(s),
		Min:      s[0],
		Max:      s[n-1],
		MedianCI: MedianCI(s, 0.95),
		MeanCI:   MeanCI(s, 0.95),
	}
}

func sorted(x []float64) []float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	return s
}

func medianSorted(s []float64) float64 {
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Median returns the middle value (the mean of the two middle values for an
// even count); NaN for no values.
func Median(x []float64) float64 { return medianSorted(sorted(x)) }

// Mean returns the arithmetic mean; NaN for no values.
func Mean(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, v := range x {
		sum += v
	}
	return sum / float64(len(x))
}

// Stddev returns the sample standard deviation (divisor n-1); NaN for n < 2.
func Stddev(x []float64) float64 {
	n := len(x)
	if n < 2 {
		return math.NaN()
	}
	m := Mean(x)
	var ss float64
	for _, v := range x {
		d := v - m
		ss += d * d
	}
	return math.Sqrt(ss / float64(n-1))
}

// CV returns the coefficient of variation, Stddev/|Mean|, as a fraction
// (0.05 = 5%). NaN when n < 2 or the mean is 0.
func CV(x []float64) float64 {
	m := Mean(x)
	if len(x) < 2 || m == 0 {
		return math.NaN()
	}
	return Stddev(x) / math.Abs(m)
}

// Percentile returns the p-th percentile (0..100) by linear interpolation
// between order statistics (Hyndman–Fan type 7, the default of R and NumPy).
func Percentile(x []float64, p float64) float64 {
	s := sorted(x)
	n := len(s)
	if n == 0 || p < 0 || p > 100 || math.IsNaN(p) {
		return math.NaN()
	}
	h := (float64(n) - 1) * p / 100
	lo := math.Floor(h)
	i := int(lo)
	if i >= n-1 {
		return s[n-1]
	}
	return s[i] + (h-lo)*(s[i+1]-s[i])
}

// MedianCI returns the distribution-free confidence interval of the median
// from order statistics: [x(j), x(n+1-j)] with the largest j whose coverage
// P(j <= B <= n-j), B ~ Binomial(n, 1/2), is at least level. When even the
// widest interval [min, max] falls short of level (n < 6 for 95%), that
// interval is returned with its lower achieved Level.
func MedianCI(x []float64, level float64) CI {
	s := sorted(x)
	n := len(s)
	if n == 0 {
		return CI{math.NaN(), math.NaN(), 0}
	}
	// Coverage of [x(j), x(n+1-j)] is 1 - 2·P(B <= j-1); the tail grows by
	// one binomial term per j, so the search is linear in n (a precision-
	// driven run recomputes this after every round).
	best, bestCov := 1, binomCoverage(n, 1)
	tail := 0.0
	for j := 1; 2*j <= n; j++ {
		tail += math.Exp(logChoose(n, j-1) - float64(n)*math.Ln2)
		cov := math.Max(0, 1-2*tail)
		if cov < level {
			break
		}
		best, bestCov = j, cov
	}
	return CI{Low: s[best-1], High: s[n-best], Level: bestCov}
}

// binomCoverage is P(j <= B <= n-j) for B ~ Binomial(n, 1/2), j >= 1:
// the probability that the median lies between the j-th smallest and the
// j-th largest of n samples.
func binomCoverage(n, j int) float64 {
	if 2*j > n {
		return 0
	}
	// 1 - 2 * P(B <= j-1), summed in log space to stay exact for large n.
	var tail float64
	for k := 0; k < j; k++ {
		tail += math.Exp(logChoose(n, k) - float64(n)*math.Ln2)
	}
	return math.Max(0, 1-2*tail)
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// MeanCI returns the Student-t confidence interval of the mean; NaN bounds
// for n < 2.
func MeanCI(x []float64, level float64) CI {
	n := len(x)
	m := Mean(x)
	if n < 2 {
		return CI{math.NaN(), math.NaN(), 0}
	}
	t := tQuantileCached(0.5+level/2, n-1)
	h := t * Stddev(x) / math.Sqrt(float64(n))
	return CI{Low: m - h, High: m + h, Level: level}
}

// tCache memoizes t quantiles: a report computes the same few (level, df)
// pairs for thousands of cells, and each inversion takes ~100 evaluations
// of the incomplete beta function.
var tCache sync.Map // [2]float64{p, df} -> float64

func tQuantileCached(p float64, df int) float64 {
	key := [2]float64{p, float64(df)}
	if v, ok := tCache.Load(key); ok {
		return v.(float64)
	}
	v := StudentTQuantile(p, float64(df))
	tCache.Store(key, v)
	return v
}
