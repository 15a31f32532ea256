package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Q̂ by hand: X = {0, 1}, Y = {3, 5}, α = 1. Between: 3+5+2+4 = 14, so
// 2/(2·2)·14 = 7; within X: 1/C(2,2) = 1; within Y: 2/1 = 2; Ê = 4;
// Q̂ = 2·2/4 · 4 = 4. Equal samples give 0; with α = 2 the energy
// distance is 2·(mean difference)² (Székely & Rizzo), so Q̂ =
// mn/(m+n)·2·Δ² for samples with equal within-variances… checked on
// X = {0, 2}, Y = {4, 6}: Ê = 2/4·(16+36+4+16) − 4 − 4 = 28, Q̂ = 28.
func TestEnergyQHandComputed(t *testing.T) {
	for _, c := range []struct {
		x, y  []float64
		alpha float64
		want  float64
	}{
		{[]float64{0, 1}, []float64{3, 5}, 1, 4},
		{[]float64{0, 0}, []float64{1, 1}, 1, 2},
		{[]float64{1, 2, 3}, []float64{1, 2, 3}, 1, 3.0 / 2 * (2.0/9*8 - 2*(4.0/3))},
		{[]float64{0, 2}, []float64{4, 6}, 2, 28},
	} {
		if got := EnergyQ(c.x, c.y, c.alpha); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("EnergyQ(%v, %v, %g) = %g, want %g", c.x, c.y, c.alpha, got, c.want)
		}
	}
}

// The O(n²) search finds the same maximum as the definition applied to
// every τ and κ.
func TestBestSplitMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 50; trial++ {
		n := 6 + rng.IntN(25)
		z := make([]float64, n)
		for i := range z {
			z[i] = rng.NormFloat64()
			if i > n/2 && trial%2 == 0 {
				z[i] += 1.5
			}
		}
		for _, alpha := range []float64{1, 0.5, 1.5} {
			for _, minSize := range []int{2, 3} {
				tau, q := bestSplit(z, minSize, alpha, &scratch{}, math.Inf(1))
				bestQ, bestTau := math.Inf(-1), -1
				for t1 := minSize; t1 <= n-minSize; t1++ {
					for k := t1 + minSize; k <= n; k++ {
						if v := EnergyQ(z[:t1], z[t1:k], alpha); v > bestQ+1e-12 {
							bestQ, bestTau = v, t1
						}
					}
				}
				if math.Abs(q-bestQ) > 1e-9*math.Max(1, math.Abs(bestQ)) || tau != bestTau {
					t.Fatalf("n=%d α=%g min=%d: bestSplit = (%d, %g), definition (%d, %g)", n, alpha, minSize, tau, q, bestTau, bestQ)
				}
			}
		}
	}
}

// series is n values around level with 2% noise, plus step from index at.
func series(rng *rand.Rand, n int, level, noise float64, steps map[int]float64) []float64 {
	out := make([]float64, n)
	shift := 0.0
	for i := range out {
		shift += steps[i]
		out[i] = level*(1+shift) + level*noise*rng.NormFloat64()
	}
	return out
}

// A synthetic 30-run history with a 10% step after run 15 (2% noise):
// exactly one change point, at 15. A flat one: none.
func TestEDivisiveStepAndFlat(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 30))
	step := series(rng, 30, 100, 0.02, map[int]float64{15: 0.10})
	cps := EDivisive(step, EDivisiveOptions{})
	if len(cps) != 1 || cps[0].Index != 15 || cps[0].P > 0.05 {
		t.Errorf("step at 15: change points %+v", cps)
	}
	flat := series(rng, 30, 100, 0.02, nil)
	if cps := EDivisive(flat, EDivisiveOptions{}); len(cps) != 0 {
		t.Errorf("flat history: change points %+v", cps)
	}
	// Same input, same answer: the permutation test has a fixed seed.
	if a, b := EDivisive(step, EDivisiveOptions{}), EDivisive(step, EDivisiveOptions{}); !reflect.DeepEqual(a, b) {
		t.Errorf("not deterministic: %+v vs %+v", a, b)
	}
}

// Known cases: two steps are both found, in order of strength; a constant
// series, a series shorter than two segments and a single outlier are not
// change points; a change in spread alone is one (energy statistics see
// the whole distribution, not only the mean).
func TestEDivisiveKnownCases(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	two := series(rng, 45, 100, 0.02, map[int]float64{15: 0.15, 30: -0.30})
	cps := EDivisive(two, EDivisiveOptions{})
	if len(cps) != 2 || cps[0].Index != 15 || cps[1].Index != 30 {
		t.Errorf("steps at 15 and 30: %+v", cps)
	} else if cps[1].Rank != 1 {
		t.Errorf("the larger step (at 30) should be found first: %+v", cps)
	}
	constant := make([]float64, 20)
	for i := range constant {
		constant[i] = 5
	}
	if cps := EDivisive(constant, EDivisiveOptions{}); len(cps) != 0 {
		t.Errorf("constant: %+v", cps)
	}
	if cps := EDivisive([]float64{1, 1, 9, 9, 9}, EDivisiveOptions{}); len(cps) != 0 {
		t.Errorf("5 values cannot hold two segments of 3: %+v", cps)
	}
	outlier := series(rng, 30, 100, 0.02, nil)
	outlier[12] = 160
	if cps := EDivisive(outlier, EDivisiveOptions{}); len(cps) != 0 {
		t.Errorf("one outlier: %+v", cps)
	}
	if cps := EDivisive(two, EDivisiveOptions{Max: 1}); len(cps) != 1 || cps[0].Index != 30 {
		t.Errorf("Max 1: %+v", cps)
	}
}

// The detector's error rates by simulation (rule 14 of the project's
// style): 300 flat 30-run histories with 3% noise (false alarms should be
// near the 5% level of the permutation test), and 300 with a 10% step at a
// random place between runs 5 and 25 (found within ±1 run).
func TestEDivisiveErrorRatesSimulated(t *testing.T) {
	rng := rand.New(rand.NewPCG(2014, 14))
	const trials = 300
	falseAlarms, found := 0, 0
	for i := 0; i < trials; i++ {
		if len(EDivisive(series(rng, 30, 100, 0.03, nil), EDivisiveOptions{Seed: uint64(i + 1)})) > 0 {
			falseAlarms++
		}
		at := 5 + rng.IntN(21)
		for _, cp := range EDivisive(series(rng, 30, 100, 0.03, map[int]float64{at: 0.10}), EDivisiveOptions{Seed: uint64(i + 1)}) {
			if cp.Index >= at-1 && cp.Index <= at+1 {
				found++
				break
			}
		}
	}
	fa, det := float64(falseAlarms)/trials, float64(found)/trials
	t.Logf("30 runs, 3%% noise: histories with a false change point %.1f%%, 10%% steps found %.1f%%", 100*fa, 100*det)
	if fa > 0.10 {
		t.Errorf("false alarm rate %.3f > 0.10", fa)
	}
	if det < 0.90 {
		t.Errorf("detection rate %.3f < 0.90", det)
	}
}

// The shortcuts (refusing a candidate once its p must exceed the level,
// and stopping a permutation's search at the first split that reaches Q̂)
// give exactly the answers of the full search: same change points, Q̂, p
// and rank, on series with and without shifts.
func TestEDivisiveShortcutsChangeNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 40; trial++ {
		n := 20 + rng.IntN(80)
		x := make([]float64, n)
		shift := 0.0
		for i := range x {
			if trial%2 == 0 && i == n/3 {
				shift = 1 + rng.Float64()
			}
			x[i] = 10 + shift + rng.NormFloat64()*0.5
		}
		fast := EDivisive(x, EDivisiveOptions{})
		shortcuts = false
		full := EDivisive(x, EDivisiveOptions{})
		shortcuts = true
		if fmt.Sprint(fast) != fmt.Sprint(full) {
			t.Fatalf("trial %d: with shortcuts %v, without %v", trial, fast, full)
		}
	}
}
