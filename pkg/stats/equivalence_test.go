package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The shift interval by hand: A = 1…5, B = 6…10 (a shift of 5). The 25
// differences b−a take the values 1…9 with counts 1 2 3 4 5 4 3 2 1.
// With 5+5 values P(U ≤ 4) = 12/252 ≤ 0.05 < P(U ≤ 5) = 19/252, so the 90%
// interval is [D(5), D(21)] = [3, 7] with coverage 1 − 24/252; for 95%,
// P(U ≤ 2) = 4/252 ≤ 0.025 < P(U ≤ 3) = 7/252: [D(3), D(23)] = [2, 8].
func TestShiftCIHandComputed(t *testing.T) {
	a := []float64{3, 1, 5, 2, 4}
	b := []float64{10, 6, 9, 7, 8}
	est, ci := ShiftCI(a, b, 0.90)
	near(t, "HL estimate", est, 5, 0)
	near(t, "90% low", ci.Low, 3, 0)
	near(t, "90% high", ci.High, 7, 0)
	near(t, "90% level", ci.Level, 1-24.0/252, 1e-12)
	_, ci = ShiftCI(a, b, 0.95)
	near(t, "95% low", ci.Low, 2, 0)
	near(t, "95% high", ci.High, 8, 0)
	near(t, "95% level", ci.Level, 1-8.0/252, 1e-12)
	// 2+2 values: 6 arrangements, the widest interval covers 1 − 2/6 < 90%.
	if _, ci := ShiftCI([]float64{1, 2}, []float64{3, 4}, 0.90); ci.Level != 0 || !math.IsNaN(ci.Low) {
		t.Errorf("2+2 interval %+v, want none", ci)
	}
	// The normal approximation above maxExactN: 30+30, k from
	// Φ((k − 1 + 0.5 − 450)/√(900·61/12)) ≤ 0.05, i.e. k − 0.5 ≤ 450 − 1.6449·67.64.
	if k, _ := shiftRank(30, 30, 0.90); k != int(math.Floor(450-1.6448536269514722*math.Sqrt(900*61.0/12)+0.5)) {
		t.Errorf("shiftRank(30, 30) = %d", k)
	}
}

// The interval inverts the Mann–Whitney test: with no ties, the 95%
// interval excludes 0 exactly when the exact test's p is ≤ 0.05 — so an
// equivalence verdict and a faster/slower verdict read the same ranks.
func TestShiftCIAgreesWithMannWhitney(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 2000; trial++ {
		na, nb := 3+rng.IntN(8), 3+rng.IntN(8)
		a, b := make([]float64, na), make([]float64, nb)
		shift := rng.Float64() * 2
		for i := range a {
			a[i] = rng.NormFloat64()
		}
		for i := range b {
			b[i] = rng.NormFloat64() + shift
		}
		p := MannWhitney(a, b).P
		_, ci := ShiftCI(a, b, 0.95)
		if ci.Level == 0 {
			continue
		}
		excludes := ci.Low > 0 || ci.High < 0
		if excludes != (p <= 0.05) {
			t.Fatalf("%d+%d: 95%% interval %+v, p=%g: they disagree", na, nb, ci, p)
		}
	}
}

// The ratio interval on positive values is the log-shift interval
// exponentiated; with a zero value it falls back to the shift over
// |median A|, and two all-zero arms are no change.
func TestRatioOfLocations(t *testing.T) {
	a := []float64{10, 10.2, 9.8, 10.1, 9.9}
	b := []float64{11, 11.22, 10.78, 11.11, 10.89} // a × 1.1
	r := RatioOfLocations(a, b, 0.90)
	near(t, "ratio estimate", r.Estimate, 1.1, 1e-9)
	if r.Scale != ScaleLog || r.CI.Low > 1.1 || r.CI.High < 1.1 {
		t.Errorf("ratio interval %+v", r)
	}
	z := RatioOfLocations([]float64{0, 0, 0, 0}, []float64{0, 0, 0, 0}, 0.90)
	if z.Scale != ScaleShift || z.CI.Low != 1 || z.CI.High != 1 || !WithinMargin(z.CI, 0.05) {
		t.Errorf("all zero: %+v, want [1, 1], within any margin", z)
	}
	s := RatioOfLocations([]float64{0, 1, 2, 1, 1}, []float64{1, 2, 3, 2, 2}, 0.90)
	if s.Scale != ScaleShift || s.Estimate != 2 { // a shift of 1 over a median of 1
		t.Errorf("with a zero: %+v, want the shift scale, estimate 2", s)
	}
}

// Each outcome from samples made for it.
func TestJudgeWithinOutcomes(t *testing.T) {
	base := []float64{10, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 10.03}
	mul := func(f float64) []float64 {
		out := make([]float64, len(base))
		for i, x := range base {
			out[i] = x * f
		}
		return out
	}
	for _, c := range []struct {
		name           string
		b              []float64
		higherIsBetter bool
		want           Outcome
		short          string
	}{
		{"latency 20% up", mul(1.2), false, OutcomeWorse, "slower 20.0% (p<0.001)"},
		{"throughput 20% up", mul(1.2), true, OutcomeBetter, "faster 20.0% (p<0.001)"},
		{"the same", mul(1), false, Equivalent, "equivalent ±5%"},
		// Significant, and inside the margin: equivalent, the direction kept.
		{"latency 1.5% up", mul(1.015), false, Equivalent, "equivalent ±5%"},
	} {
		v := JudgeWithin(base, c.b, c.higherIsBetter, 0.05)
		if v.Outcome != c.want || v.Short("faster", "slower") != c.short {
			t.Errorf("%s: %v %q, want %v %q (%s)", c.name, v.Outcome, v.Short("faster", "slower"), c.want, c.short, v.Text("faster", "slower"))
		}
	}
	if v := JudgeWithin(base, mul(1.015), false, 0.05); v.Direction != Worse || v.Text("faster", "slower") !=
		"equivalent within ±5% (92% CI +1.0% to +2.0%; slower by 1.5%, p=0.0011)" {
		t.Errorf("a significant change inside the margin: %v, %q", v.Direction, v.Text("faster", "slower"))
	}
	// Noisy and small: undecided, with an estimate of the samples needed.
	a := []float64{10, 12, 9, 11, 10.5}
	b := []float64{10.4, 12.5, 9.2, 11.8, 10.6}
	v := JudgeWithin(a, b, false, 0.05)
	if v.Outcome != Undecided || v.MoreSamples < 1 {
		t.Fatalf("noisy: %v, %d more", v.Outcome, v.MoreSamples)
	}
	if got := v.Short("faster", "slower"); got != "undecided (≈"+itoa(v.MoreSamples)+" more)" {
		t.Errorf("short: %q", got)
	}
	// A margin of 50% takes the same samples as equivalent.
	if v := JudgeWithin(a, b, false, 0.5); v.Outcome != Equivalent {
		t.Errorf("±50%%: %v (%s)", v.Outcome, v.Text("faster", "slower"))
	}
	// 3+3 values: the Mann–Whitney test cannot reach 0.05; the note says so.
	if v := JudgeWithin([]float64{1, 2, 3}, []float64{4, 5, 6}, false, 0.05); v.Outcome != Undecided || v.Note == "" {
		t.Errorf("3+3: %v, note %q", v.Outcome, v.Note)
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// sample draws n values around mean with a coefficient of variation cv,
// lognormally (skewed, like latency).
func sample(rng *rand.Rand, n int, mean, cv float64) []float64 {
	s := math.Sqrt(math.Log1p(cv * cv))
	out := make([]float64, n)
	for i := range out {
		out[i] = mean * math.Exp(s*rng.NormFloat64()-s*s/2)
	}
	return out
}

// The verdict rule's error rates by simulation (STYLE.md 14). For each
// case, trials of two arms of n samples with a 3% coefficient of
// variation (lognormal), B's true location × ratio:
//   - identical arms called faster or slower: the Mann–Whitney test's
//     false positive rate, at most α = 5%;
//   - B exactly on the margin (×1.05) called equivalent: the equivalence
//     test's false positive rate, at most 5% by construction of TOST;
//   - a true 10% difference called equivalent: never, in practice;
//   - identical arms called equivalent, and a 10% difference called
//     slower: the power, which grows with n (printed, and held to a floor).
func TestVerdictErrorRatesSimulated(t *testing.T) {
	const trials = 3000
	rng := rand.New(rand.NewPCG(23, 5))
	rates := func(n int, ratio float64) map[Outcome]float64 {
		count := map[Outcome]float64{}
		for i := 0; i < trials; i++ {
			v := JudgeWithin(sample(rng, n, 10, 0.03), sample(rng, n, 10*ratio, 0.03), false, 0.05)
			count[v.Outcome]++
		}
		for k := range count {
			count[k] /= trials
		}
		return count
	}
	// Monte Carlo slack: 3000 trials put a 5% rate's standard error at 0.4%.
	const slack = 0.012
	for _, n := range []int{6, 10, 16} {
		same, margin, tenth := rates(n, 1), rates(n, 1.05), rates(n, 1.10)
		t.Logf("n=%d per arm: identical: %.1f%% faster/slower, %.1f%% equivalent, %.1f%% undecided; "+
			"×1.05: %.1f%% equivalent; ×1.10: %.1f%% equivalent, %.1f%% slower",
			n, 100*(same[OutcomeBetter]+same[OutcomeWorse]), 100*same[Equivalent], 100*same[Undecided],
			100*margin[Equivalent], 100*tenth[Equivalent], 100*tenth[OutcomeWorse])
		if fp := same[OutcomeBetter] + same[OutcomeWorse]; fp > Alpha+slack {
			t.Errorf("n=%d: identical arms called different in %.1f%% of trials, want ≤ %.0f%%", n, 100*fp, 100*Alpha)
		}
		if margin[Equivalent] > 0.05+slack {
			t.Errorf("n=%d: a change on the margin called equivalent in %.1f%%, want ≤ 5%%", n, 100*margin[Equivalent])
		}
		if tenth[Equivalent] > 0.001 {
			t.Errorf("n=%d: a 10%% change called equivalent in %.2f%%", n, 100*tenth[Equivalent])
		}
		if tenth[OutcomeWorse] < 0.95 {
			t.Errorf("n=%d: a 10%% slowdown found in only %.1f%%", n, 100*tenth[OutcomeWorse])
		}
		if n >= 10 && same[Equivalent] < 0.9 {
			t.Errorf("n=%d: identical arms called equivalent in only %.1f%%", n, 100*same[Equivalent])
		}
	}
}

// The estimate of how many more samples decide an undecided cell, tried:
// undecided comparisons of identical or 6%-apart arms with 8% noise are
// measured again with the estimated number of extra samples per arm. The
// estimate assumes the centre stays put, so about half should decide; far
// fewer would mean it is too optimistic, nearly all too pessimistic.
func TestMoreSamplesEstimateSimulated(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 6))
	for _, ratio := range []float64{1, 1.08} {
		var undecided, decided int
		for i := 0; i < 1500 && undecided < 400; i++ {
			a, b := sample(rng, 6, 10, 0.08), sample(rng, 6, 10*ratio, 0.08)
			v := JudgeWithin(a, b, false, 0.05)
			if v.Outcome != Undecided || v.MoreSamples < 0 || v.MoreSamples > 200 {
				continue
			}
			undecided++
			a = append(a, sample(rng, v.MoreSamples, 10, 0.08)...)
			b = append(b, sample(rng, v.MoreSamples, 10*ratio, 0.08)...)
			if JudgeWithin(a, b, false, 0.05).Outcome != Undecided {
				decided++
			}
		}
		rate := float64(decided) / float64(undecided)
		t.Logf("×%.2f: %d undecided cells, %.0f%% decided with the estimated extra samples", ratio, undecided, 100*rate)
		if undecided < 100 || rate < 0.3 || rate > 0.95 {
			t.Errorf("×%.2f: %d of %d decided (%.0f%%), want 30–95%%", ratio, decided, undecided, 100*rate)
		}
	}
}
