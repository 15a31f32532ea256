package stats

import (
	"math"
	"math/rand/v2"
	"sort"
)

// BootstrapSeed is the fixed seed of the Monte Carlo bootstrap (used only
// for cells with more than ExactBootstrapMaxN values), so a report rendered
// twice from the same samples is identical.
const BootstrapSeed = 0x636e6962 // "cnib"

// BootstrapResamples is the number of Monte Carlo resamples. 2000 puts the
// 2.5% and 97.5% percentiles on 50 draws each, enough for a stable interval.
const BootstrapResamples = 2000

// ExactBootstrapMaxN is the largest sample whose bootstrap distribution of
// the median is computed exactly (O(n³)); benchmark cells have 3–10 repeats.
const ExactBootstrapMaxN = 30

// Ratio is num's median over den's median with a bootstrap confidence
// interval.
type Ratio struct {
	Value float64 `json:"value"`
	CI    CI      `json:"ci"`
}

// Atom is one value of a discrete distribution and its probability.
type Atom struct {
	Value, P float64
}

// RatioOfMedians returns median(num)/median(den) and a 95% percentile
// bootstrap interval of that ratio, both samples resampled independently
// with replacement.
//
// For samples of up to ExactBootstrapMaxN values the bootstrap distribution
// is computed exactly — what infinitely many resamples would give — from
// the distribution of a resample's median (BootstrapMedian), so there is no
// Monte Carlo noise and no seed. Larger samples use BootstrapResamples
// resamples from BootstrapSeed.
//
// Value is NaN when either sample is empty or den's median is 0; the
// interval is [Value, Value] with Level 0 when either sample has fewer than
// 2 values, since resampling one value says nothing about spread.
func RatioOfMedians(num, den []float64) Ratio {
	md := Median(den)
	if len(num) == 0 || len(den) == 0 || md == 0 {
		nan := math.NaN()
		return Ratio{Value: nan, CI: CI{nan, nan, 0}}
	}
	v := Median(num) / md
	if len(num) < 2 || len(den) < 2 {
		return Ratio{Value: v, CI: CI{v, v, 0}}
	}
	if len(num) <= ExactBootstrapMaxN && len(den) <= ExactBootstrapMaxN {
		dn, dd := BootstrapMedian(num), BootstrapMedian(den)
		atoms := make([]Atom, 0, len(dn)*len(dd))
		var total float64
		for _, a := range dn {
			for _, b := range dd {
				if b.Value == 0 {
					continue // a resample with a zero denominator has no ratio
				}
				atoms = append(atoms, Atom{a.Value / b.Value, a.P * b.P})
				total += a.P * b.P
			}
		}
		sort.Slice(atoms, func(i, j int) bool { return atoms[i].Value < atoms[j].Value })
		return Ratio{Value: v, CI: CI{Low: quantile(atoms, total, 0.025), High: quantile(atoms, total, 0.975), Level: 0.95}}
	}
	return Ratio{Value: v, CI: monteCarloRatioCI(num, den)}
}

// quantile is the smallest atom value whose cumulative probability reaches
// q (atoms sorted by value, probabilities summing to total).
func quantile(atoms []Atom, total, q float64) float64 {
	var cum float64
	for _, a := range atoms {
		cum += a.P / total
		if cum >= q-1e-12 {
			return a.Value
		}
	}
	return atoms[len(atoms)-1].Value
}

// BootstrapMedian is the exact distribution of the median of a resample of
// len(x) draws with replacement from x, as atoms sorted by value (equal
// values merged).
//
// With x sorted as v1 ≤ … ≤ vn and k = ⌈n/2⌉, a resample's median is its
// k-th smallest draw X(k) when n is odd, and (X(k) + X(k+1))/2 when n is
// even. Counting draws below, at and above each index is multinomial:
//   - P(X(k) = va) = P(Bin(n, a/n) ≥ k) − P(Bin(n, (a−1)/n) ≥ k);
//   - for a < b, P(X(k) = va, X(k+1) = vb) = Σ_{L<k} n!/(L!(k−L)!(n−k)!)
//     ((a−1)/n)^L (1/n)^(k−L) [((n−b+1)/n)^(n−k) − ((n−b)/n)^(n−k)]:
//     L draws below a, the rest of the lowest k at a, none between a and b,
//     at least one at b;
//   - P(X(k) = X(k+1) = va) = Σ_{L<k} Σ_{m ≥ k+1−L} multinomial(L, m, n−L−m).
func BootstrapMedian(x []float64) []Atom {
	v := sorted(x)
	n := len(v)
	if n == 0 {
		return nil
	}
	fn := float64(n)
	var atoms []Atom
	if n%2 == 1 {
		k := (n + 1) / 2
		prev := 0.0
		for a := 1; a <= n; a++ {
			cur := binomTailGE(n, float64(a)/fn, k)
			atoms = append(atoms, Atom{v[a-1], cur - prev})
			prev = cur
		}
		return mergeAtoms(atoms)
	}
	k := n / 2
	lf := logFactorials(n)
	pow := func(p float64, e int) float64 {
		if e == 0 {
			return 1
		}
		return math.Pow(p, float64(e))
	}
	for a := 1; a <= n; a++ {
		pl, pa := float64(a-1)/fn, 1/fn
		pg := float64(n-a) / fn
		// Both middle draws at a.
		var same float64
		for L := 0; L < k; L++ {
			for m := k + 1 - L; m <= n-L; m++ {
				if m < 1 {
					continue
				}
				c := math.Exp(lf[n] - lf[L] - lf[m] - lf[n-L-m])
				same += c * pow(pl, L) * pow(pa, m) * pow(pg, n-L-m)
			}
		}
		atoms = append(atoms, Atom{v[a-1], same})
		// X(k) at a, X(k+1) at b > a.
		var lower float64 // P(L < k draws below a, k−L at a) with the other n−k above a, summed over L
		for L := 0; L < k; L++ {
			c := math.Exp(lf[n] - lf[L] - lf[k-L] - lf[n-k])
			lower += c * pow(pl, L) * pow(pa, k-L)
		}
		for b := a + 1; b <= n; b++ {
			above := pow(float64(n-b+1)/fn, n-k) - pow(float64(n-b)/fn, n-k)
			atoms = append(atoms, Atom{(v[a-1] + v[b-1]) / 2, lower * above})
		}
	}
	return mergeAtoms(atoms)
}

func mergeAtoms(atoms []Atom) []Atom {
	sort.SliceStable(atoms, func(i, j int) bool { return atoms[i].Value < atoms[j].Value })
	out := atoms[:0]
	for _, a := range atoms {
		if a.P <= 0 {
			continue
		}
		if len(out) > 0 && out[len(out)-1].Value == a.Value {
			out[len(out)-1].P += a.P
			continue
		}
		out = append(out, a)
	}
	return out
}

// binomTailGE is P(Bin(n, p) ≥ k).
func binomTailGE(n int, p float64, k int) float64 {
	if p >= 1 {
		return 1
	}
	var s float64
	for i := k; i <= n; i++ {
		s += math.Exp(logChoose(n, i) + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return s
}

func logFactorials(n int) []float64 {
	lf := make([]float64, n+1)
	for i := 1; i <= n; i++ {
		lf[i] = lf[i-1] + math.Log(float64(i))
	}
	return lf
}

// monteCarloRatioCI is the resampling bootstrap for large samples.
func monteCarloRatioCI(num, den []float64) CI {
	rng := rand.New(rand.NewPCG(BootstrapSeed, uint64(len(num))<<32|uint64(len(den))))
	bn := make([]float64, len(num))
	bd := make([]float64, len(den))
	rs := make([]float64, 0, BootstrapResamples)
	for i := 0; i < BootstrapResamples; i++ {
		for j := range bn {
			bn[j] = num[rng.IntN(len(num))]
		}
		for j := range bd {
			bd[j] = den[rng.IntN(len(den))]
		}
		sort.Float64s(bd)
		d := medianSorted(bd)
		if d == 0 {
			continue
		}
		sort.Float64s(bn)
		rs = append(rs, medianSorted(bn)/d)
	}
	sort.Float64s(rs)
	return CI{Low: Percentile(rs, 2.5), High: Percentile(rs, 97.5), Level: 0.95}
}
