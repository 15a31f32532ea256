package stats

import (
	"math"
	"math/rand/v2"
	"sort"
)

// BootstrapSeed is the fixed seed of every bootstrap, so a report rendered
// twice from the same samples is identical.
const BootstrapSeed = 0x636e6962 // "cnib"

// BootstrapResamples is the number of resamples. 2000 puts the 2.5% and
// 97.5% percentiles on 50 draws each, enough for a stable interval.
const BootstrapResamples = 2000

// Ratio is num's median over den's median with a percentile-bootstrap
// confidence interval.
type Ratio struct {
	Value float64 `json:"value"`
	CI    CI      `json:"ci"`
}

// RatioOfMedians returns median(num)/median(den) and a 95% percentile
// bootstrap interval: both samples are resampled with replacement
// independently, BootstrapResamples times, from a fixed seed. Value is NaN
// when either sample is empty or den's median is 0; the interval is
// [Value, Value] with Level 0 when either sample has fewer than 2 values,
// since resampling one value says nothing about spread.
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
		d := Median(bd)
		if d == 0 {
			continue // a resample with a zero denominator has no ratio
		}
		rs = append(rs, Median(bn)/d)
	}
	sort.Float64s(rs)
	return Ratio{Value: v, CI: CI{Low: Percentile(rs, 2.5), High: Percentile(rs, 97.5), Level: 0.95}}
}
