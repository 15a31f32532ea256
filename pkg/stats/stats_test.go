package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-want) > tol {
		t.Errorf("%s = %.10g, want %.10g (±%g)", what, got, want, tol)
	}
}

// Hand-computed location and spread.
func TestSummaryHandComputed(t *testing.T) {
	// Sorted: 2 4 4 4 5 5 7 9; mean 5, sum of squares 32, sample var 32/7.
	x := []float64{9, 2, 5, 4, 4, 7, 4, 5}
	s := Summarize(x)
	near(t, "median", s.Median, 4.5, 0)
	near(t, "mean", s.Mean, 5, 1e-12)
	near(t, "stddev", s.Stddev, math.Sqrt(32.0/7), 1e-12)
	near(t, "cv", s.CV, math.Sqrt(32.0/7)/5, 1e-12)
	near(t, "min", s.Min, 2, 0)
	near(t, "max", s.Max, 9, 0)
	if x[0] != 9 {
		t.Error("Summarize reordered its input")
	}
	near(t, "odd median", Median([]float64{3, 1, 2}), 2, 0)
	if !math.IsNaN(Median(nil)) || !math.IsNaN(Stddev([]float64{1})) || !math.IsNaN(CV([]float64{-1, 1})) {
		t.Error("undefined statistics must be NaN, not a number")
	}
}

// Percentiles against NumPy's default (linear, type 7), worked by hand:
// for [1,2,3,4], h = 3p/100; p25 -> h=0.75 -> 1.75; p90 -> h=2.7 -> 3.7.
func TestPercentileType7(t *testing.T) {
	x := []float64{4, 1, 3, 2}
	for _, c := range []struct{ p, want float64 }{{0, 1}, {25, 1.75}, {50, 2.5}, {90, 3.7}, {100, 4}} {
		near(t, "percentile", Percentile(x, c.p), c.want, 1e-12)
	}
	if !math.IsNaN(Percentile(x, 101)) {
		t.Error("p > 100 must be NaN")
	}
}

// Student t quantiles from printed t tables (two-sided 95%).
func TestStudentTQuantileTable(t *testing.T) {
	for _, c := range []struct{ df, want float64 }{
		{1, 12.7062047362}, {2, 4.3026527297}, {4, 2.7764451052}, {10, 2.2281388520}, {30, 2.0422724563},
	} {
		near(t, "t(0.975)", StudentTQuantile(0.975, c.df), c.want, 1e-6)
	}
	// df=3 has a closed form: 1/2 + (1/π)(t/(√3(1+t²/3)) + atan(t/√3)); t=2 gives 0.930337015720578.
	near(t, "StudentTCDF(2,3)", StudentTCDF(2, 3), 0.930337015720578, 1e-12)
	near(t, "StudentTCDF(-2,3)", StudentTCDF(-2, 3), 1-0.930337015720578, 1e-12)
	// Large df approaches the normal quantile 1.959964.
	near(t, "t(0.975, 1e6)", StudentTQuantile(0.975, 1e6), 1.959964, 1e-5)
}

func TestMeanCIHandComputed(t *testing.T) {
	// mean 10, sample sd 2 (values 8,10,12 ... checked: var = (4+0+4)/2 = 4).
	ci := MeanCI([]float64{8, 10, 12}, 0.95)
	h := 4.3026527297 * 2 / math.Sqrt(3)
	near(t, "low", ci.Low, 10-h, 1e-6)
	near(t, "high", ci.High, 10+h, 1e-6)
}

// The binomial order-statistic interval: for n=5 only [min,max] is
// possible, with coverage 1 - 2/32 = 0.9375; for n=10, j=2 covers
// 1 - 2·(1+10)/1024 = 0.978515625 and j=3 only 0.890625.
func TestMedianCIOrderStatistics(t *testing.T) {
	ci := MedianCI([]float64{5, 1, 4, 2, 3}, 0.95)
	near(t, "n=5 low", ci.Low, 1, 0)
	near(t, "n=5 high", ci.High, 5, 0)
	near(t, "n=5 level", ci.Level, 0.9375, 1e-12)
	x := []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	ci = MedianCI(x, 0.95)
	near(t, "n=10 low", ci.Low, 2, 0)
	near(t, "n=10 high", ci.High, 9, 0)
	near(t, "n=10 level", ci.Level, 0.978515625, 1e-12)
}

// Known distributions: over many draws from N(0,1) the 95% intervals must
// cover the true centre about 95% of the time (binomial sd over 2000
// trials is 0.5%, so ±2% is a four-sigma band).
func TestCoverageOnNormalSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const trials = 2000
	var meanHits, medHits int
	var medLevel float64
	for i := 0; i < trials; i++ {
		x := make([]float64, 12)
		for j := range x {
			x[j] = rng.NormFloat64()
		}
		if c := MeanCI(x, 0.95); c.Low <= 0 && 0 <= c.High {
			meanHits++
		}
		c := MedianCI(x, 0.95)
		medLevel = c.Level
		if c.Low <= 0 && 0 <= c.High {
			medHits++
		}
	}
	near(t, "mean CI coverage", float64(meanHits)/trials, 0.95, 0.02)
	near(t, "median CI coverage", float64(medHits)/trials, medLevel, 0.02)
}

// scipy.stats.mannwhitneyu's documented example (males vs females):
// U1 = 17, exact p = 0.1111111; asymptotic (continuity-corrected) p =
// 0.11134688653314041. Recomputed independently by enumerating all
// C(9,4) splits in Python.
func TestMannWhitneyTextbook(t *testing.T) {
	males := []float64{19, 22, 16, 29, 24}
	females := []float64{20, 11, 17, 12}
	r := MannWhitney(males, females)
	near(t, "U1", r.U1, 17, 0)
	near(t, "U2", r.U2, 3, 0)
	near(t, "p exact", r.P, 1.0/9, 1e-12)
	if r.Method != MethodExact {
		t.Errorf("method %q, want exact", r.Method)
	}
	_, p := normalApprox(17, 5, 4, 0)
	near(t, "p normal", p, 0.11134688653314041, 1e-12)
	// Wikipedia's tortoise and hare race: finishing order THHHHHTTTTTH,
	// U = 11 (and 25); two-sided exact p = 0.3095 (enumerated).
	var tortoise, hare []float64
	for i, c := range "THHHHHTTTTTH" {
		if c == 'T' {
			tortoise = append(tortoise, float64(i))
		} else {
			hare = append(hare, float64(i))
		}
	}
	r = MannWhitney(tortoise, hare)
	near(t, "hare U", r.U, 11, 0)
	near(t, "hare p", r.P, 0.30952380952380953, 1e-12)
}

// Complete separation of 5 vs 5: p = 2/C(10,5) = 0.0079365; of 3 vs 3:
// 2/20 = 0.1, so 3 repeats can never be significant.
func TestMannWhitneySeparationAndMinP(t *testing.T) {
	r := MannWhitney([]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10})
	near(t, "U", r.U, 0, 0)
	near(t, "p", r.P, 2.0/252, 1e-12)
	near(t, "MinP(5,5)", MinP(5, 5), 2.0/252, 1e-12)
	near(t, "MinP(3,3)", MinP(3, 3), 0.1, 1e-12)
}

// Ties: a=[1,2,2,3,5] b=[2,3,4,4,6]: U1 = 6.5; the exact permutation p over
// the 252 splits is 0.2222 (enumerated in Python); the tie-corrected normal
// approximation gives Σ(t³-t)=36, σ²=22.0833, z=1.17039, p=0.241844.
func TestMannWhitneyTies(t *testing.T) {
	a := []float64{1, 2, 2, 3, 5}
	b := []float64{2, 3, 4, 4, 6}
	r := MannWhitney(a, b)
	near(t, "U1", r.U1, 6.5, 0)
	near(t, "p perm", r.P, 2.0/9, 1e-12)
	if r.Method != MethodPermutation {
		t.Errorf("method %q, want %q", r.Method, MethodPermutation)
	}
	_, tie, _ := midranks(append(append([]float64{}, a...), b...))
	near(t, "tie term", tie, 36, 0)
	z, p := normalApprox(6.5, 5, 5, tie)
	near(t, "z", z, 1.1703893885176493, 1e-12)
	near(t, "p normal", p, 0.2418443040494631, 1e-12)
	all := MannWhitney([]float64{3, 3, 3}, []float64{3, 3, 3})
	near(t, "all tied p", all.P, 1, 0)
}

// Without ties the counting recurrence and brute-force enumeration are two
// independent exact methods; they must agree.
func TestExactAgreesWithEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 30; trial++ {
		n1, n2 := 2+rng.IntN(6), 2+rng.IntN(6)
		a, b := make([]float64, n1), make([]float64, n2)
		for i := range a {
			a[i] = rng.Float64()
		}
		for i := range b {
			b[i] = rng.Float64() + 0.3
		}
		r := MannWhitney(a, b)
		ranks, _, _ := midranks(append(append([]float64{}, a...), b...))
		near(t, "exact vs enumeration", r.P, permutationP(ranks, n1, r.U1), 1e-12)
	}
}

// Large samples use the normal approximation; under the null it must reject
// about Alpha of the time, and a clear shift must be found.
func TestMannWhitneyLargeSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const trials = 1000
	rejects := 0
	for i := 0; i < trials; i++ {
		a, b := make([]float64, 40), make([]float64, 40)
		for j := range a {
			a[j], b[j] = rng.NormFloat64(), rng.NormFloat64()
		}
		r := MannWhitney(a, b)
		if r.Method != MethodNormal {
			t.Fatalf("n=80 used %q", r.Method)
		}
		if r.P < Alpha {
			rejects++
		}
	}
	near(t, "false positive rate", float64(rejects)/trials, 0.05, 0.025)
}

func TestRatioOfMediansBootstrap(t *testing.T) {
	num := []float64{20, 21, 19, 22, 20}
	den := []float64{10, 10.5, 9.5, 11, 10}
	r := RatioOfMedians(num, den)
	near(t, "ratio", r.Value, 2, 1e-12)
	if !(r.CI.Low <= 2 && r.CI.High >= 2 && r.CI.Low > 1.5 && r.CI.High < 2.6) {
		t.Errorf("ratio CI %+v implausible", r.CI)
	}
	if again := RatioOfMedians(num, den); again != r {
		t.Errorf("bootstrap not reproducible: %+v vs %+v", again, r)
	}
	// The interval's ends are ratios of sample values: bounded by the
	// extreme possible ratios min(num)/max(den) and max(num)/min(den).
	if r.CI.Low < 19/11.0 || r.CI.High > 22/9.5 {
		t.Errorf("ratio CI %+v outside the possible range", r.CI)
	}
	if z := RatioOfMedians(num, []float64{0, 0}); !math.IsNaN(z.Value) {
		t.Error("ratio to a zero median must be NaN")
	}
}

func TestVerdictDirection(t *testing.T) {
	fast := []float64{10, 11, 10.5, 10.2, 10.8}
	slow := []float64{13, 12.5, 13.2, 12.9, 13.1}
	// Latency (lower is better): going from slow (median 13) to fast (10.5)
	// is better by 2.5/13 = 19.2%.
	v := Judge(slow, fast, false)
	if v.Direction != Better || v.String() != "faster by 19.2% (p=0.0079)" {
		t.Errorf("latency verdict %v %q", v.Direction, v.String())
	}
	// Throughput (higher is better): the same numbers are worse.
	v = Judge(slow, fast, true)
	if v.Direction != Worse || v.Text("better", "worse") != "worse by 19.2% (p=0.0079)" {
		t.Errorf("throughput verdict %v %q", v.Direction, v.Text("better", "worse"))
	}
	v = Judge([]float64{1, 2, 3}, []float64{4, 5, 6}, true)
	if v.Significant() || v.String() != "undecided (p=0.1; 90% CI +33.3% to +500.0%; ≈1 more sample per arm would decide it (an estimate); 3+3 repeats cannot reach p<0.05)" {
		t.Errorf("3+3 verdict %q", v.String())
	}
	v = Judge([]float64{1, 3, 5, 7, 9}, []float64{2, 4, 6, 8, 10}, true)
	if v.Significant() || v.Note != "" {
		t.Errorf("overlapping verdict %q", v.String())
	}
}

// Hand-computed: resampling {1,2,3} three times, the median is 1 when at
// least two draws are 1: 3·(1/3)²·(2/3) + (1/3)³ = 7/27; it is ≤ 2 when at
// least two draws are ≤ 2: 3·(2/3)²·(1/3) + (2/3)³ = 20/27.
func TestBootstrapMedianHandComputed(t *testing.T) {
	d := BootstrapMedian([]float64{3, 1, 2})
	if len(d) != 3 {
		t.Fatalf("atoms %v", d)
	}
	near(t, "P(M=1)", d[0].P, 7.0/27, 1e-12)
	near(t, "P(M=2)", d[1].P, 13.0/27, 1e-12)
	near(t, "P(M=3)", d[2].P, 7.0/27, 1e-12)
	// n=2 from {1,3}: draws (1,1) (1,3) (3,1) (3,3) give medians 1, 2, 2, 3.
	d = BootstrapMedian([]float64{1, 3})
	if len(d) != 3 || d[1].Value != 2 {
		t.Fatalf("atoms %v", d)
	}
	near(t, "P(M=1)", d[0].P, 0.25, 1e-12)
	near(t, "P(M=2)", d[1].P, 0.5, 1e-12)
}

// The exact distribution must match brute-force enumeration of all n^n
// resamples, for odd and even n and with ties.
func TestBootstrapMedianEnumeration(t *testing.T) {
	for _, x := range [][]float64{{5, 1, 4, 2}, {2, 7, 1, 8, 3}, {1, 2, 2, 3, 9, 4}, {4, 4, 4, 1}} {
		n := len(x)
		want := map[float64]float64{}
		idx := make([]int, n)
		total := math.Pow(float64(n), float64(n))
		for {
			r := make([]float64, n)
			for i, j := range idx {
				r[i] = x[j]
			}
			want[Median(r)] += 1 / total
			i := 0
			for i < n {
				idx[i]++
				if idx[i] < n {
					break
				}
				idx[i] = 0
				i++
			}
			if i == n {
				break
			}
		}
		got := BootstrapMedian(x)
		if len(got) != len(want) {
			t.Fatalf("%v: %d atoms, want %d", x, len(got), len(want))
		}
		var sum float64
		for _, a := range got {
			near(t, "P", a.P, want[a.Value], 1e-12)
			sum += a.P
		}
		near(t, "total probability", sum, 1, 1e-12)
	}
}

// For large samples the Monte Carlo bootstrap is used; it must agree with
// the exact one where both apply (up to resampling noise).
func TestExactAndMonteCarloRatioAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	num, den := make([]float64, 12), make([]float64, 12)
	for i := range num {
		num[i], den[i] = 20+rng.NormFloat64(), 10+rng.NormFloat64()*0.5
	}
	exact := RatioOfMedians(num, den).CI
	mc := monteCarloRatioCI(num, den)
	near(t, "low", mc.Low, exact.Low, 0.05)
	near(t, "high", mc.High, exact.High, 0.05)
}
