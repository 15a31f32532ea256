package stats

import (
	"math"
	"math/rand/v2"
	"sort"
)

// E-divisive means: hierarchical change-point detection by energy
// statistics (Matteson & James, "A Nonparametric Approach for Multiple
// Change Point Analysis of Multivariate Data", JASA 2014), the method
// MongoDB's and Datastax's performance-history tools (signal-processing,
// hunter, Orion) use to find where a benchmark's level shifted.
//
// For a split of a segment into X (m values) and Y (n values) the
// divergence of their distributions is
//
//	Ê(X,Y;α) = 2/(mn) Σᵢⱼ|Xᵢ−Yⱼ|^α − C(m,2)⁻¹ Σᵢ<ₖ|Xᵢ−Xₖ|^α − C(n,2)⁻¹ Σⱼ<ₖ|Yⱼ−Yₖ|^α
//
// (zero exactly when the distributions are equal, for 0<α<2), scaled to
// Q̂ = mn/(m+n) · Ê. The search takes the τ and κ that maximise Q̂ with X
// = Z[s:τ] and Y = Z[τ:κ] inside one current segment; τ is the candidate.
// Its significance comes from a permutation test: the values are shuffled
// within each current segment and the best Q̂ found again; p = (#{Q̂perm ≥
// Q̂} + 1) / (R + 1). Candidates are accepted until p exceeds the level.
// It assumes no distribution (skewed latency needs that); with α = 1 it is
// most sensitive to shifts in level, which is what a history shows.

// EDivisiveOptions tune the detector. The zero value means the defaults.
type EDivisiveOptions struct {
	// Alpha is the distance exponent, in (0, 2); default 1.
	Alpha float64
	// MinSize is the fewest observations a segment may have, at least 2
	// (the within-segment term needs a pair); default 3.
	MinSize int
	// Permutations per significance test; default 199.
	Permutations int
	// Level is the significance level of each accepted change point;
	// default 0.05.
	Level float64
	// Seed makes the permutation test reproducible; the same data and
	// options always give the same change points.
	Seed uint64
	// Max bounds the number of change points; 0 = no bound.
	Max int
}

func (o EDivisiveOptions) withDefaults() EDivisiveOptions {
	if o.Alpha <= 0 || o.Alpha >= 2 {
		o.Alpha = 1
	}
	if o.MinSize < 2 {
		o.MinSize = 3
	}
	if o.Permutations <= 0 {
		o.Permutations = 199
	}
	if o.Level <= 0 || o.Level >= 1 {
		o.Level = 0.05
	}
	if o.Seed == 0 {
		o.Seed = 0x5eed_cb
	}
	return o
}

// ChangePoint is a detected change: the series' distribution differs from
// Index on (Index is the first observation of the new segment).
type ChangePoint struct {
	Index int
	Q     float64 // the energy statistic Q̂ when it was found
	P     float64 // its permutation p-value
	Rank  int     // 1 = found first (the strongest split), 2 = next, …
}

// EDivisive returns the change points of x, sorted by Index. NaN values
// are not allowed (the caller drops unmeasured runs).
func EDivisive(x []float64, opt EDivisiveOptions) []ChangePoint {
	o := opt.withDefaults()
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	bounds := []int{0, len(x)} // segment k is x[bounds[k]:bounds[k+1]]
	var out []ChangePoint
	perm := make([]float64, len(x))
	sc := &scratch{}
	// A candidate is refused once ge+1 > Level·(R+1): p can only grow
	// from there, so the remaining permutations cannot change the answer
	// and are not run. The same candidates are accepted, with the same p,
	// as with every permutation run; a series with nothing to find stops
	// after about Level·(R+1)/Level ≈ 20 permutations instead of 199.
	refuse := o.Level * float64(o.Permutations+1)
	stopAt := func(q float64) float64 { return q }
	if !shortcuts {
		refuse, stopAt = math.Inf(1), func(float64) float64 { return math.Inf(1) }
	}
	for o.Max == 0 || len(out) < o.Max {
		tau, q := bestOverSegments(x, bounds, o, sc, math.Inf(1))
		if tau < 0 || q <= 0 {
			break
		}
		ge := 0
		for r := 0; r < o.Permutations && float64(ge+1) <= refuse; r++ {
			copy(perm, x)
			for k := 0; k+1 < len(bounds); k++ {
				seg := perm[bounds[k]:bounds[k+1]]
				rng.Shuffle(len(seg), func(i, j int) { seg[i], seg[j] = seg[j], seg[i] })
			}
			// Only whether some split reaches q matters: stop there.
			if _, qp := bestOverSegments(perm, bounds, o, sc, stopAt(q)); qp >= q {
				ge++
			}
		}
		p := float64(ge+1) / float64(o.Permutations+1)
		if p > o.Level {
			break
		}
		out = append(out, ChangePoint{Index: tau, Q: q, P: p, Rank: len(out) + 1})
		bounds = append(bounds, tau)
		sort.Ints(bounds)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// shortcuts turns on the two ways EDivisive skips work that cannot change
// its answer; a test turns them off to check that.
var shortcuts = true

// bestOverSegments is the best split τ (an index into x) over every
// segment long enough to split, or -1. It returns as soon as a split
// reaches stop (then that split, not necessarily the best).
func bestOverSegments(x []float64, bounds []int, o EDivisiveOptions, sc *scratch, stop float64) (int, float64) {
	best, bestQ := -1, math.Inf(-1)
	for k := 0; k+1 < len(bounds); k++ {
		s, e := bounds[k], bounds[k+1]
		if tau, q := bestSplit(x[s:e], o.MinSize, o.Alpha, sc, stop); tau >= 0 && q > bestQ {
			best, bestQ = s+tau, q
			if q >= stop {
				break
			}
		}
	}
	return best, bestQ
}

// scratch is bestSplit's prefix-sum table, kept across calls: a long
// history calls it hundreds of times per change point.
type scratch struct{ col []float64 }

// bestSplit maximises Q̂(z[:τ], z[τ:κ]) over τ and κ with both parts at
// least minSize long, in O(n²): column prefix sums of the distance matrix
// give each between- and within-part sum in constant time. It stops at
// the first split whose Q̂ reaches stop.
func bestSplit(z []float64, minSize int, alpha float64, sc *scratch, stop float64) (int, float64) {
	n := len(z)
	if n < 2*minSize {
		return -1, 0
	}
	// col[k][a] = Σ_{i<a} |z_i − z_k|^α, for a ≤ k: row k of a triangle
	// stored flat from offset k(k+1)/2.
	if need := n * (n + 1) / 2; cap(sc.col) < need {
		sc.col = make([]float64, need)
	}
	col := make([][]float64, n)
	for k := range col {
		off := k * (k + 1) / 2
		col[k] = sc.col[off : off+k+1]
		col[k][0] = 0
		for i := 0; i < k; i++ {
			col[k][i+1] = col[k][i] + dist(z[i], z[k], alpha)
		}
	}
	best, bestQ := -1, math.Inf(-1)
	wx := 0.0 // Σ_{i<k<τ} d(i,k)
	for tau := 1; tau <= n-minSize; tau++ {
		wx += col[tau-1][tau-1]
		if tau < minSize {
			continue
		}
		m := float64(tau)
		between, wy := 0.0, 0.0
		for kappa := tau + 1; kappa <= n; kappa++ {
			j := kappa - 1 // the value joining Y
			between += col[j][tau]
			wy += col[j][j] - col[j][tau]
			ny := kappa - tau
			if ny < minSize {
				continue
			}
			fn := float64(ny)
			e := 2/(m*fn)*between - wx/(m*(m-1)/2) - wy/(fn*(fn-1)/2)
			if q := m * fn / (m + fn) * e; q > bestQ {
				best, bestQ = tau, q
				if q >= stop {
					return best, bestQ
				}
			}
		}
	}
	return best, bestQ
}

func dist(a, b, alpha float64) float64 {
	d := math.Abs(a - b)
	if alpha == 1 {
		return d
	}
	return math.Pow(d, alpha)
}

// EnergyQ is Q̂(X,Y;α) of two samples, straight from the definition (each
// needs at least two values): the statistic EDivisive maximises.
func EnergyQ(x, y []float64, alpha float64) float64 {
	m, n := float64(len(x)), float64(len(y))
	var b, wx, wy float64
	for _, a := range x {
		for _, c := range y {
			b += dist(a, c, alpha)
		}
	}
	for i := range x {
		for k := i + 1; k < len(x); k++ {
			wx += dist(x[i], x[k], alpha)
		}
	}
	for i := range y {
		for k := i + 1; k < len(y); k++ {
			wy += dist(y[i], y[k], alpha)
		}
	}
	e := 2/(m*n)*b - wx/(m*(m-1)/2) - wy/(n*(n-1)/2)
	return m * n / (m + n) * e
}
