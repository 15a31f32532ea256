package stats

import (
	"math"
	"sort"
)

// Mann–Whitney method names, as reported in MWResult.Method.
const (
	// MethodExact is the exact null distribution of U (no ties), by
	// counting rank arrangements.
	MethodExact = "exact"
	// MethodPermutation is the exact permutation distribution of U over
	// all splits of the pooled samples, used when there are ties and the
	// number of splits is small enough to enumerate.
	MethodPermutation = "exact-permutation"
	// MethodNormal is the normal approximation with tie correction and
	// continuity correction, for larger samples.
	MethodNormal = "normal"
)

// maxEnumerate bounds the number of splits enumerated for the tied exact
// test; C(20,10) = 184756 keeps it well under a millisecond per cell.
const maxEnumerate = 200000

// maxExactN bounds the no-ties exact test: counts of rank arrangements stay
// exact in float64 up to C(50,25) ≈ 1.3e14 < 2^53.
const maxExactN = 50

// MWResult is the outcome of a two-sided Mann–Whitney U test.
type MWResult struct {
	U1     float64 `json:"u1"` // U of the first sample: pairs (a, b) with a > b, ties counting 1/2
	U2     float64 `json:"u2"` // n1*n2 - U1
	U      float64 `json:"u"`  // min(U1, U2)
	Z      float64 `json:"z"`  // normal score (MethodNormal only; NaN otherwise)
	P      float64 `json:"p"`  // two-sided p-value
	Method string  `json:"method"`
}

// MannWhitney tests whether a and b come from the same distribution against
// a shift in either direction. It is exact for small samples (MethodExact,
// or MethodPermutation when there are ties) and uses the normal
// approximation with tie and continuity correction otherwise. For empty
// input P is NaN.
func MannWhitney(a, b []float64) MWResult {
	n1, n2 := len(a), len(b)
	if n1 == 0 || n2 == 0 {
		return MWResult{U1: math.NaN(), U2: math.NaN(), U: math.NaN(), Z: math.NaN(), P: math.NaN()}
	}
	pooled := make([]float64, 0, n1+n2)
	pooled = append(pooled, a...)
	pooled = append(pooled, b...)
	ranks, tieTerm, ties := midranks(pooled)
	var r1 float64
	for i := 0; i < n1; i++ {
		r1 += ranks[i]
	}
	u1 := r1 - float64(n1*(n1+1))/2
	res := MWResult{U1: u1, U2: float64(n1*n2) - u1, Z: math.NaN()}
	res.U = math.Min(res.U1, res.U2)
	n := n1 + n2
	switch {
	case !ties && n <= maxExactN:
		res.Method = MethodExact
		res.P = math.Min(1, 2*exactUCDF(n1, n2, res.U))
	case ties && choose(n, n1) <= maxEnumerate:
		res.Method = MethodPermutation
		res.P = permutationP(ranks, n1, u1)
	default:
		res.Method = MethodNormal
		res.Z, res.P = normalApprox(u1, n1, n2, tieTerm)
	}
	return res
}

// normalApprox returns |z| and the two-sided p of U1 under the normal
// approximation, with the variance corrected for ties (tieTerm = Σ(t³-t))
// and a continuity correction of 1/2.
func normalApprox(u1 float64, n1, n2 int, tieTerm float64) (z, p float64) {
	mu := float64(n1*n2) / 2
	fn := float64(n1 + n2)
	sigma2 := float64(n1*n2) / 12 * ((fn + 1) - tieTerm/(fn*(fn-1)))
	if sigma2 <= 0 { // every value equal: no evidence of any shift
		return 0, 1
	}
	z = math.Max(0, math.Abs(u1-mu)-0.5) / math.Sqrt(sigma2)
	return z, math.Min(1, math.Erfc(z/math.Sqrt2))
}

// midranks ranks x from 1, giving tied values the mean of their ranks. It
// returns the ranks in x's order, Σ(t³-t) over tie groups, and whether any
// tie exists.
func midranks(x []float64) (ranks []float64, tieTerm float64, ties bool) {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return x[idx[i]] < x[idx[j]] })
	ranks = make([]float64, len(x))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && x[idx[j+1]] == x[idx[i]] {
			j++
		}
		r := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			ranks[idx[k]] = r
		}
		if t := float64(j - i + 1); t > 1 {
			tieTerm += t*t*t - t
			ties = true
		}
		i = j + 1
	}
	return ranks, tieTerm, ties
}

// exactUCDF returns P(U <= u) under the null for sample sizes n1, n2 with no
// ties. It counts arrangements with the recurrence
// c(m, k, u) = c(m-1, k, u-k) + c(m, k-1, u): the largest of the m+k values
// belongs either to the first sample (beating all k of the second) or not.
func exactUCDF(n1, n2 int, u float64) float64 {
	maxU := n1 * n2
	// prev[k][v]: count for (m-1, k); cur for (m, k).
	prev := make([][]float64, n2+1)
	for k := range prev {
		prev[k] = make([]float64, maxU+1)
		prev[k][0] = 1 // m = 0: one arrangement, U = 0
	}
	for m := 1; m <= n1; m++ {
		cur := make([][]float64, n2+1)
		cur[0] = make([]float64, maxU+1)
		cur[0][0] = 1
		for k := 1; k <= n2; k++ {
			cur[k] = make([]float64, maxU+1)
			for v := 0; v <= m*k; v++ {
				c := cur[k-1][v]
				if v >= k {
					c += prev[k][v-k]
				}
				cur[k][v] = c
			}
		}
		prev = cur
	}
	total := choose(n1+n2, n1)
	var below float64
	for v := 0; v <= maxU && float64(v) <= u+1e-9; v++ {
		below += prev[n2][v]
	}
	return below / total
}

// permutationP enumerates every way to pick n1 of the pooled ranks as the
// first sample and returns the share of splits whose U is at least as far
// from its mean as the observed one (two-sided).
func permutationP(ranks []float64, n1 int, u1 float64) float64 {
	n := len(ranks)
	mu := float64(n1*(n-n1)) / 2
	obs := math.Abs(u1 - mu)
	base := float64(n1*(n1+1)) / 2
	var extreme, total float64
	pick := make([]int, n1)
	var rec func(start, depth int, sum float64)
	rec = func(start, depth int, sum float64) {
		if depth == n1 {
			total++
			if math.Abs(sum-base-mu) >= obs-1e-9 {
				extreme++
			}
			return
		}
		for i := start; i <= n-(n1-depth); i++ {
			pick[depth] = i
			rec(i+1, depth+1, sum+ranks[i])
		}
	}
	rec(0, 0, 0)
	return extreme / total
}

// choose returns C(n, k) as a float64 (exact below 2^53).
func choose(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	if k > n-k {
		k = n - k
	}
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return math.Round(r)
}

// MinP returns the smallest two-sided p-value the exact test can produce
// for sample sizes n1 and n2 (complete separation): 2/C(n1+n2, n1). With
// 3 + 3 repeats it is 0.1, so no difference can ever be significant at 0.05.
func MinP(n1, n2 int) float64 {
	if n1 == 0 || n2 == 0 {
		return 1
	}
	return math.Min(1, 2/choose(n1+n2, n1))
}
