package report

import (
	"math/rand/v2"
	"testing"

	"github.com/cnibench/cnibench/pkg/stats"
)

func TestParseGate(t *testing.T) {
	for in, want := range map[string]float64{"slower>5%": 5, "worse>2.5%": 2.5, " slower > 10 % ": 10, "worse>0%": 0} {
		g, err := ParseGate(in)
		if err != nil || g.Pct != want {
			t.Errorf("ParseGate(%q) = %+v, %v", in, g, err)
		}
	}
	for _, in := range []string{"", "faster>5%", "slower>5", "slower>=5%", "slower>-5%", "slower>1e3%", "slower>2000%"} {
		if _, err := ParseGate(in); err == nil {
			t.Errorf("ParseGate(%q) accepted", in)
		}
	}
}

// The gate's error rates, by simulation: latency samples with a 3%
// coefficient of variation, 5 repeats per run (the default experiment's),
// 4,000 trials each. Same distribution twice: the gate must pass (false
// positives ≤ 5%); B 10% slower: it must fail (misses ≤ 10%). The rates
// measured here are logged.
func TestGateErrorRatesSimulated(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 7))
	g, _ := ParseGate("slower>5%")
	sample := func(mean float64) []float64 {
		out := make([]float64, 5)
		for i := range out {
			out[i] = mean * (1 + 0.03*rng.NormFloat64())
		}
		return out
	}
	rate := func(slowdown float64) float64 {
		fails := 0
		const trials = 4000
		for i := 0; i < trials; i++ {
			v := stats.Judge(sample(10), sample(10*(1+slowdown)), false)
			if g.Fails(ComparisonRow{Verdict: &v}) {
				fails++
			}
		}
		return float64(fails) / trials
	}
	fp, power := rate(0), rate(0.10)
	t.Logf("slower>5%%, n=5+5, CV 3%%: false positives %.2f%%, detection of a 10%% slowdown %.1f%%", 100*fp, 100*power)
	if fp > 0.05 {
		t.Errorf("false positive rate %.3f > 0.05", fp)
	}
	if power < 0.90 {
		t.Errorf("detection rate %.3f < 0.90", power)
	}
}
