package report

import (
	"bytes"
	"encoding/xml"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/stats"
)

func TestParseGate(t *testing.T) {
	type want struct {
		test, metric string
		pct          float64
	}
	for in, ws := range map[string][]want{
		"slower>5%":                   {{"", "", 5}},
		"worse>2.5%":                  {{"", "", 2.5}},
		" slower > 10 % ":             {{"", "", 10}},
		"worse>0%":                    {{"", "", 0}},
		"slower>5%,tcp_lat:slower>3%": {{"", "", 5}, {"tcp_lat", "", 3}},
		"rtt_p99_us:worse>20%, udp_bw:slower>15%": {{"", "rtt_p99_us", 20}, {"udp_bw", "", 15}},
		"tcp_crr/client_cpu_us_per_txn:worse>10%": {{"tcp_crr", "client_cpu_us_per_txn", 10}},
	} {
		g, err := ParseGate(in)
		if err != nil || len(g.Rules) != len(ws) {
			t.Errorf("ParseGate(%q) = %+v, %v", in, g, err)
			continue
		}
		for i, w := range ws {
			if r := g.Rules[i]; r.Test != w.test || r.Metric != w.metric || r.Pct != w.pct {
				t.Errorf("ParseGate(%q) rule %d = %+v, want %+v", in, i, r, w)
			}
		}
	}
	for in, msg := range map[string]string{
		"":                                   "empty",
		"faster>5%":                          "want [SELECTOR:]worse>N%",
		"slower>5":                           "want",
		"slower>=5%":                         "want",
		"slower>-5%":                         "want",
		"slower>1e3%":                        "want",
		"slower>2000%":                       "0-1000%",
		"slower>5%,":                         `rule ""`,
		"tcp_lta:slower>5%":                  `"tcp_lta" is neither a test`,
		"tcp_lat/rtt_p98_us:slower>5%":       `unknown metric "rtt_p98_us"`,
		"tcp_lta/rtt_p99_us:slower>5%":       `unknown test "tcp_lta"`,
		"slower>5%,worse>3%":                 "select the same cells",
		"tcp_lat:slower>5%,tcp_lat:worse>1%": "select the same cells",
	} {
		_, err := ParseGate(in)
		if err == nil || !strings.Contains(err.Error(), msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseGate(%q): %v, want a one-line error with %q", in, err, msg)
		}
	}
}

// gateRow is a compared cell of test/metric with its values in A and B.
func gateRow(test string, m metric, a, b []float64) ComparisonRow {
	v := stats.Judge(a, b, m.HigherIsBetter)
	return ComparisonRow{Arm: "x", Test: test, Size: 1, Column: Column{Test: test, Size: 1, metric: m},
		A: &Cell{Values: a}, B: &Cell{Values: b}, Verdict: &v}
}

func scaled(xs []float64, f float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * f
	}
	return out
}

// Per-metric direction and the most specific rule.
func TestGateDirectionsAndRules(t *testing.T) {
	base := []float64{10, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98}
	up8, down8 := scaled(base, 1.08), scaled(base, 0.92)
	g, err := ParseGate("slower>5%,tcp_lat:slower>10%,rtt_p99_us:worse>2%")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		row  ComparisonRow
		fail bool
	}{
		{"latency up 8%, tcp_lat rule 10%", gateRow("tcp_lat", mOneWay, base, up8), false},
		{"latency up 8%, udp_lat falls to the general 5%", gateRow("udp_lat", mOneWay, base, up8), true},
		{"latency down 8% is better", gateRow("udp_lat", mOneWay, base, down8), false},
		{"throughput down 8%", gateRow("tcp_bw", mRecvMbps, base, down8), true},
		{"throughput up 8% is better", gateRow("tcp_bw", mRecvMbps, base, up8), false},
		{"transactions down 8%", gateRow("tcp_crr", mTPS, base, down8), true},
		{"loss up 8%", gateRow("udp_bw", mLoss, base, up8), true},
		{"CPU per transaction up 8%", gateRow("tcp_crr", mCPUPerTxn, base, up8), true},
		{"CPU per transaction down 8%", gateRow("tcp_crr", mCPUPerTxn, base, down8), false},
		{"tcp_lat p99: the metric rule (2%) beats the test rule (10%)", gateRow("tcp_lat", mRTT99, base, up8), true},
		{"identical", gateRow("udp_lat", mOneWay, base, base), false},
	} {
		if got := g.Fails(c.row); got != c.fail {
			t.Errorf("%s: Fails = %v, want %v (verdict %+v, rule %+v)", c.name, got, c.fail, *c.row.Verdict, g.RuleFor(c.row))
		}
	}
	// A cell no rule selects is not gated; a selector without cells is unused.
	only, _ := ParseGate("tcp_crr:slower>1%,udp_bw:slower>1%")
	rows := []ComparisonRow{gateRow("udp_lat", mOneWay, base, up8), gateRow("tcp_crr", mTPS, base, down8)}
	if f := only.Gate(rows); len(f) != 1 || f[0].Test != "tcp_crr" {
		t.Errorf("Gate = %+v, want the tcp_crr row only", f)
	}
	if u := only.Unused(rows); len(u) != 1 || u[0].Test != "udp_bw" {
		t.Errorf("Unused = %+v, want the udp_bw rule", u)
	}
	if s := only.Passed(rows[:1]); !strings.Contains(s, "none of 0 gated cells") || !strings.Contains(s, "1 cells not gated") {
		t.Errorf("Passed = %q", s)
	}
}

func TestGateJUnitGolden(t *testing.T) {
	base := []float64{10, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98}
	g, _ := ParseGate("slower>5%")
	rows := []ComparisonRow{
		gateRow("tcp_lat", mOneWay, base, scaled(base, 1.08)),
		gateRow("tcp_crr", mTPS, base, scaled(base, 1.02)),
		{Arm: "x", Test: "udp_bw", Size: 1, Column: Column{Test: "udp_bw", Size: 1, metric: mLoss}, Missing: "B: all 5 samples failed"},
	}
	var b bytes.Buffer
	if err := g.JUnit(&b, "cnibench compare a b (slower>5%)", rows); err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests, Failures, Skipped int `xml:",attr"`
	}
	if err := xml.Unmarshal(b.Bytes(), &suite); err != nil {
		t.Fatalf("not XML: %v\n%s", err, b.String())
	}
	golden(t, "gate.junit.xml", b.Bytes())
	if !strings.Contains(b.String(), "Mann–Whitney p=") || !strings.Contains(b.String(), "median A 10, median B 10.8") {
		t.Errorf("failure text lacks the numbers:\n%s", b.String())
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
			if g.Fails(gateRow("tcp_lat", mOneWay, sample(10), sample(10*(1+slowdown)))) {
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

// A rule naming a metric the table does not show adds that metric's cells
// to the comparison (and gates them); the stored run is not changed.
func TestGateAddMetrics(t *testing.T) {
	ra, sa := kubeOVNRun()
	rb, sb := kubeOVNRun()
	g, _ := ParseGate("slower>5%,tcp_lat/rtt_p50_us:worse>1%")
	rows, _, _ := Comparison(ra, sa, rb, sb)
	for _, r := range rows {
		if r.Column.metric.Name == mRTT50.Name {
			t.Fatal("rtt_p50_us compared without being asked for")
		}
	}
	if u := g.Unused(rows); len(u) != 1 {
		t.Errorf("Unused before AddMetrics: %+v", u)
	}
	before := ra.Labels
	g.AddMetrics(ra)
	g.AddMetrics(rb)
	if before != nil {
		t.Fatal("fixture has labels; the test assumes none")
	}
	rows, _, _ = Comparison(ra, sa, rb, sb)
	found := 0
	for _, r := range rows {
		if r.Column.metric.Name == mRTT50.Name && r.Verdict != nil {
			found++
			if rule := g.RuleFor(r); r.Test == "tcp_lat" && (rule == nil || rule.Metric != mRTT50.Name) {
				t.Errorf("%s: rule %+v", rowName(r), rule)
			}
		}
	}
	if found == 0 || len(g.Unused(rows)) != 0 {
		t.Errorf("rtt_p50_us rows: %d, unused rules %+v", found, g.Unused(rows))
	}
}

// The gate keeps its meaning with equivalence verdicts: it reads the
// Mann–Whitney direction and its own threshold, not the margin. A
// significant 1.5% slowdown is "equivalent within ±5%" in the verdict, and
// still fails 'slower>1%'; the margin changes the verdict, never the gate.
func TestGateIgnoresTheMargin(t *testing.T) {
	base := []float64{10, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 10.03}
	strict, _ := ParseGate("slower>1%")
	loose, _ := ParseGate("slower>2%")
	for _, margin := range []float64{0.005, 0.05, 0.5} {
		v := stats.JudgeWithin(base, scaled(base, 1.015), false, margin)
		row := ComparisonRow{Arm: "x", Test: "tcp_lat", Size: 1, Column: Column{Test: "tcp_lat", Size: 1, metric: mOneWay},
			A: &Cell{Values: base}, B: &Cell{Values: scaled(base, 1.015)}, Verdict: &v}
		if !strict.Fails(row) || loose.Fails(row) {
			t.Errorf("margin ±%g%%: slower>1%% fails %v, slower>2%% fails %v; want true, false", margin*100, strict.Fails(row), loose.Fails(row))
		}
		if margin == 0.05 && v.Outcome != stats.Equivalent {
			t.Errorf("±5%%: outcome %v, want equivalent", v.Outcome)
		}
	}
}
