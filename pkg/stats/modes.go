package stats

import (
	"math"
	"math/rand/v2"
	"sort"
)

// The two-mode rule. A cell whose repeats fall into two clusters (tcp_lat
// samples at 2.3 µs and at 5.0 µs) has a median and an interval that
// describe neither; the report shows the two modes instead. The rule
// splits the logarithms of the values (a 2.2× split is the same on 2 µs
// and on 20 µs) into the two groups with the least within-group sum of
// squares (1-D 2-means, exact over the sorted order), and calls them two
// modes when all of these hold:
//   - at least MinModeSamples values, every one positive;
//   - each group holds at least 2 values and ModeMinShare of them: one or
//     two stray values in a large cell are outliers, not a mode;
//   - the split leaves at most ModeMaxWithin of the variance within the
//     groups (ModeMaxWithinSmall below 10 values, where chance splits
//     are cleaner): a unimodal sample's best split leaves about 20–35%,
//     two tight modes 2.2× apart about 1%;
//   - the upper mode's median is at least ModeMinRatio times the lower's:
//     values that fall on a few discrete levels (a histogram's p50, CPU
//     accounted in ticks) cluster tightly a few percent apart, and that
//     is not two ways of running.
//
// The share is a ratio of variances of logarithms, so it does not depend
// on the unit or on how noisy the machine was, only on the shape.
// TestTwoModesSimulated measures the rule's error rates.
const (
	MinModeSamples     = 6
	ModeMinShare       = 0.2
	ModeMaxWithin      = 0.10
	ModeMaxWithinSmall = 0.05
	ModeMinRatio       = 1.25
)

// TwoModes is a sample split into its two modes.
type TwoModes struct {
	// Low and High are the indices (into the values given) of each mode's
	// values, in the values' order.
	Low, High []int
	// LowMedian and HighMedian are each mode's median.
	LowMedian, HighMedian float64
	// Within is the share of the variance (of the logarithms) left inside
	// the modes, 0..1: the lower, the cleaner the split.
	Within float64
}

// FindTwoModes applies the two-mode rule to x; ok is false when x is not
// two modes (or too small, or not all positive, to tell).
func FindTwoModes(x []float64) (m TwoModes, ok bool) {
	n := len(x)
	if n < MinModeSamples {
		return m, false
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
		if !(x[i] > 0) {
			return m, false
		}
	}
	sort.SliceStable(idx, func(i, j int) bool { return x[idx[i]] < x[idx[j]] })
	l := make([]float64, n)
	for i, k := range idx {
		l[i] = math.Log(x[k])
	}
	// Prefix sums give each split's within-group sum of squares in O(1).
	sum, sq := make([]float64, n+1), make([]float64, n+1)
	for i, v := range l {
		sum[i+1], sq[i+1] = sum[i]+v, sq[i]+v*v
	}
	ss := func(i, j int) float64 { // values i..j-1
		k := float64(j - i)
		s := sum[j] - sum[i]
		return math.Max(0, sq[j]-sq[i]-s*s/k)
	}
	total := ss(0, n)
	if total == 0 {
		return m, false
	}
	minSize := max(2, int(math.Ceil(ModeMinShare*float64(n))))
	best, bestSS := 0, math.Inf(1)
	for k := minSize; k <= n-minSize; k++ {
		if w := ss(0, k) + ss(k, n); w < bestSS {
			best, bestSS = k, w
		}
	}
	if best == 0 {
		return m, false
	}
	limit := ModeMaxWithin
	if n < 10 {
		limit = ModeMaxWithinSmall
	}
	if bestSS/total > limit {
		return m, false
	}
	m.Within = bestSS / total
	for i, k := range idx {
		if i < best {
			m.Low = append(m.Low, k)
		} else {
			m.High = append(m.High, k)
		}
	}
	sort.Ints(m.Low)
	sort.Ints(m.High)
	m.LowMedian, m.HighMedian = Median(pick(x, m.Low)), Median(pick(x, m.High))
	if m.HighMedian < ModeMinRatio*m.LowMedian {
		return TwoModes{}, false
	}
	return m, true
}

func pick(x []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for i, k := range idx {
		out[i] = x[k]
	}
	return out
}

// A Feature is one recorded property of each sample of a cell (the CPU
// its sides ran on, the load beside it, its place in the run), given to
// Separate to explain a split. Exactly one of Cat (a category per sample)
// and Num (a number per sample) is set, with one entry per sample.
type Feature struct {
	Name string
	Cat  []string
	Num  []float64
}

// Separation is how well one feature tells two groups of samples apart.
type Separation struct {
	Feature string
	// Accuracy is the share of samples that the best single rule on the
	// feature — one threshold, or one group per category — puts in their
	// own group.
	Accuracy float64
	// P is the chance that, with the labels shuffled at random, some
	// feature tried reaches that accuracy: a family-wise p-value, since
	// the best of several features is named (SeparationShuffles shuffles
	// from a fixed seed, so the same samples always give the same answer).
	P float64
	// Tried is how many features could be scored (those that vary).
	Tried int
}

// The best feature separates two modes when its rule puts at least
// SeparationMinAccuracy of the samples in their own mode and shuffled
// labels let some feature do as well in at most SeparationMaxP of
// shuffles. TestSeparationSimulated measures how often a feature is named
// when none separates the modes, and how often the right one is named
// when one does.
const (
	SeparationMinAccuracy = 0.9
	SeparationMaxP        = 0.05
	SeparationShuffles    = 999
)

// BestSeparation finds the feature that best tells the samples with
// low[i] from the others (highest accuracy, the first given on a tie) and
// whether it separates them by the rule above. Features with one value for
// every sample, or of another length, are not tried.
func BestSeparation(low []bool, fs []Feature) (Separation, bool) {
	var accs []func([]bool) float64
	var names []string
	for _, f := range fs {
		if (f.Cat != nil && len(f.Cat) != len(low)) || (f.Num != nil && len(f.Num) != len(low)) {
			continue
		}
		if acc := separationAccuracy(f); acc != nil {
			accs, names = append(accs, acc), append(names, f.Name)
		}
	}
	if len(accs) == 0 {
		return Separation{}, false
	}
	best := func(l []bool) (float64, int) {
		b, at := -1.0, 0
		for i, acc := range accs {
			if a := acc(l); a > b+1e-12 {
				b, at = a, i
			}
		}
		return b, at
	}
	obs, at := best(low)
	rng := newShuffleRand(len(low))
	perm := append([]bool(nil), low...)
	hits := 0
	for i := 0; i < SeparationShuffles; i++ {
		rng.Shuffle(len(perm), func(a, b int) { perm[a], perm[b] = perm[b], perm[a] })
		if a, _ := best(perm); a >= obs-1e-12 {
			hits++
		}
	}
	s := Separation{Feature: names[at], Accuracy: obs, P: float64(1+hits) / float64(1+SeparationShuffles), Tried: len(accs)}
	return s, s.Accuracy >= SeparationMinAccuracy && s.P <= SeparationMaxP
}

// separationAccuracy returns the accuracy of the best rule on f for a
// labelling; nil when f cannot separate anything (one value throughout).
func separationAccuracy(f Feature) func(low []bool) float64 {
	if f.Cat != nil {
		cats := map[string]int{}
		code := make([]int, len(f.Cat))
		for i, c := range f.Cat {
			k, ok := cats[c]
			if !ok {
				k = len(cats)
				cats[c] = k
			}
			code[i] = k
		}
		if len(cats) < 2 {
			return nil
		}
		return func(low []bool) float64 {
			n := make([][2]int, len(cats))
			for i, k := range code {
				if low[i] {
					n[k][0]++
				} else {
					n[k][1]++
				}
			}
			right := 0
			for _, c := range n {
				right += max(c[0], c[1])
			}
			return float64(right) / float64(len(code))
		}
	}
	order := make([]int, len(f.Num))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return f.Num[order[i]] < f.Num[order[j]] })
	if len(order) == 0 || f.Num[order[0]] == f.Num[order[len(order)-1]] {
		return nil
	}
	return func(low []bool) float64 {
		total := 0
		for _, l := range low {
			if l {
				total++
			}
		}
		// Cut after position i (only between different values): the low
		// group below the cut and the other above, or the other way round.
		best, lowBelow := 0, 0
		n := len(order)
		for i := 0; i < n-1; i++ {
			if low[order[i]] {
				lowBelow++
			}
			if f.Num[order[i]] == f.Num[order[i+1]] {
				continue
			}
			highAbove := (n - i - 1) - (total - lowBelow)
			a := lowBelow + highAbove
			best = max(best, a, n-a)
		}
		return float64(best) / float64(n)
	}
}

// newShuffleRand is the fixed-seed generator of Separate's shuffles.
func newShuffleRand(n int) *rand.Rand {
	return rand.New(rand.NewPCG(BootstrapSeed, uint64(n)))
}
