package engine

import (
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/cnibench/cnibench/pkg/result"
)

// latHist records round-trip times in nanoseconds. Percentiles come from an
// HDR histogram (3 significant digits, so ≤0.1% error); count, min, max,
// mean and stddev are kept exactly beside it, because the mean is what
// qperf and sockperf print and what cnibench is compared against.
type latHist struct {
	h          *hdrhistogram.Histogram
	n          int64
	sum, sumsq float64
	min, max   int64
}

// histMax is the largest round trip recorded (60 s); longer ones saturate.
const histMax = 60_000_000_000

func newLatHist() *latHist {
	return &latHist{h: hdrhistogram.New(1, histMax, 3), min: math.MaxInt64}
}

// record adds one round trip. It allocates nothing.
func (l *latHist) record(ns int64) {
	if ns < 1 {
		ns = 1
	}
	if ns > histMax {
		ns = histMax
	}
	_ = l.h.RecordValue(ns) // cannot fail inside [1, histMax]
	l.n++
	f := float64(ns)
	l.sum += f
	l.sumsq += f * f
	if ns < l.min {
		l.min = ns
	}
	if ns > l.max {
		l.max = ns
	}
}

func (l *latHist) merge(o *latHist) {
	l.h.Merge(o.h)
	l.n += o.n
	l.sum += o.sum
	l.sumsq += o.sumsq
	l.min = min(l.min, o.min)
	l.max = max(l.max, o.max)
}

// dist returns the round-trip distribution, and ok false when empty.
func (l *latHist) dist() (result.Dist, bool) {
	if l.n == 0 {
		return result.Dist{}, false
	}
	mean := l.sum / float64(l.n)
	v := l.sumsq/float64(l.n) - mean*mean
	if v < 0 { // rounding
		v = 0
	}
	q := func(p float64) *float64 { return result.F(l.quantile(p)) }
	return result.Dist{
		Count:  l.n,
		Min:    result.F(float64(l.min)),
		Mean:   result.F(mean),
		Stddev: result.F(math.Sqrt(v)),
		P50:    q(50),
		P90:    q(90),
		P99:    q(99),
		P999:   q(99.9),
		Max:    result.F(float64(l.max)),
	}, true
}

// quantile is the HDR value at percentile p, clamped to the exact min and
// max (HDR reports the top of a bucket, which can pass the true maximum).
func (l *latHist) quantile(p float64) float64 {
	switch p {
	case 0:
		return float64(l.min)
	case 100:
		return float64(l.max)
	}
	v := l.h.ValueAtQuantile(p)
	return float64(min(max(v, l.min), l.max))
}

// cdfPercentiles are the points of the CDF in results: dense in the tail,
// where datapaths differ.
var cdfPercentiles = []float64{0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85, 90,
	91, 92, 93, 94, 95, 96, 97, 98, 99, 99.5, 99.9, 99.95, 99.99, 100}

func (l *latHist) cdf() []result.CDFPoint {
	if l.n == 0 {
		return nil
	}
	out := make([]result.CDFPoint, 0, len(cdfPercentiles))
	for _, p := range cdfPercentiles {
		out = append(out, result.CDFPoint{Percentile: p, Ns: l.quantile(p)})
	}
	return out
}

// latency builds result.Latency, or nil when nothing was recorded.
func (l *latHist) latency() *result.Latency {
	d, ok := l.dist()
	if !ok {
		return nil
	}
	return &result.Latency{RTTNs: d, OneWayNs: d.Halved(), CDF: l.cdf()}
}
