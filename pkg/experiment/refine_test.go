package experiment

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
)

// noisyMeasurer returns tcp_lat values around 100 with a spread per
// server endpoint: arms named "noisy…" scatter ±30%, the others ±0.5%.
type noisyMeasurer struct {
	rng *rand.Rand
	n   map[string]int
}

func (m *noisyMeasurer) Measure(_ context.Context, req MeasureRequest) (*result.Result, error) {
	spread := 0.005
	if strings.HasPrefix(req.ServerNetns, "vxlan") {
		spread = 0.3
	}
	m.n[req.ServerNetns]++
	v := 100 * (1 + spread*(2*m.rng.Float64()-1))
	r := result.New(result.Tool{Name: req.Engine}, req.Spec.Test, req.Spec.MsgSize)
	r.Latency = &result.Latency{OneWayNs: result.Dist{Count: 1, Mean: result.F(v * 1000)}}
	return r, nil
}

const precisionDoc = `name: p
tests: [tcp_lat]
repeats: 5
duration: 100ms
warmup: 0s
precision: 5%
budget: 1h
arms:
  - {name: quiet, topology: veth}
  - {name: noisy, topology: vxlan}
`

// Only the cell that misses the target gets more rounds, until it meets
// it; the stored status says so.
func TestPrecisionRoundsOnlyForImpreciseCells(t *testing.T) {
	e := mustParse(t, precisionDoc)
	m := &noisyMeasurer{rng: rand.New(rand.NewPCG(1, 2)), n: map[string]int{}}
	sink := &memSink{}
	if _, err := Execute(context.Background(), e, Options{Labs: &fakeLabs{}, Measurer: m, Sink: sink}); err != nil {
		t.Fatal(err)
	}
	quiet, noisy := m.n["veth/server"], m.n["vxlan/server"]
	if quiet != 5 {
		t.Errorf("quiet arm measured %d times, want the fixed 5 only", quiet)
	}
	if noisy <= 5 {
		t.Errorf("noisy arm measured %d times: no extra rounds", noisy)
	}
	var vals []float64
	for _, s := range sink.samples {
		if s.Arm.Name == "noisy" {
			v, _ := result.PrimaryMetric(s.Step.Test).Get(s.Result)
			vals = append(vals, v)
		}
	}
	if w := relHalfWidth(vals); w > 0.05 {
		t.Errorf("noisy cell ended at ±%.1f%% with %d samples", w*100, len(vals))
	}
	if !sink.complete || !strings.Contains(sink.status, "precision ±5% reached by 2 of 2 cells") {
		t.Errorf("status %q", sink.status)
	}
}

// A budget smaller than what the noisy cell needs stops the rounds and
// names the cell that missed the target, with its width and sample count.
func TestPrecisionBudgetSpent(t *testing.T) {
	e := mustParse(t, strings.Replace(precisionDoc, "budget: 1h", "budget: 2s", 1))
	// Each step takes ~50 ms here, so 2 s holds the fixed rounds and a few more.
	m := &slowMeasurer{noisyMeasurer{rng: rand.New(rand.NewPCG(3, 4)), n: map[string]int{}}, 50 * time.Millisecond}
	sink := &memSink{}
	if _, err := Execute(context.Background(), e, Options{Labs: &fakeLabs{}, Measurer: m, Sink: sink}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sink.status, "budget 2s spent") || !strings.Contains(sink.status, "not reached: noisy tcp_lat 1B (±") {
		t.Errorf("status %q", sink.status)
	}
}

type slowMeasurer struct {
	noisyMeasurer
	d time.Duration
}

func (m *slowMeasurer) Measure(ctx context.Context, req MeasureRequest) (*result.Result, error) {
	time.Sleep(m.d)
	return m.noisyMeasurer.Measure(ctx, req)
}

func TestPrecisionParseErrors(t *testing.T) {
	base := "name: x\ntests: [tcp_lat]\nduration: 1s\narms: [{name: a, topology: veth}, {name: b, topology: native}]\n"
	for _, tc := range []struct{ extra, want string }{
		{"precision: 0%\n", ""},
		{"precision: 60%\n", "field precision: 60% (want more than 0% and at most 50%)"},
		{"precision: -1%\n", "field precision: -1%"},
		{"precision: five\n", `bad percentage "five"`},
		{"budget: 5m\n", "field budget: only meaningful with precision"},
		{"precision: 5%\nbudget: 1s\n", "field budget: 1s is shorter than one round of the experiment"},
	} {
		_, err := Parse([]byte(base+tc.extra), "x.yaml")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.extra, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.extra, err, tc.want)
		}
	}
	e := mustParse(t, base)
	p := 0.7
	if err := e.Override(Overrides{Precision: &p}); err == nil || !strings.Contains(err.Error(), "--precision 70%") {
		t.Errorf("--precision 70%%: %v", err)
	}
	d := time.Minute
	if err := e.Override(Overrides{Budget: &d}); err == nil || !strings.Contains(err.Error(), "--budget needs a precision") {
		t.Errorf("--budget alone: %v", err)
	}
}

// The stopping rule looks at each cell's own interval only. Simulated on
// skewed noisy data (log-normal, CV ~30%), the intervals it reports still
// cover the true median about 95% of the time: stopping on precision does
// not bias coverage the way stopping on a p-value biases error rates.
func TestPrecisionRuleCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const sims, target, minN, maxN = 2000, 0.05, 5, 400
	sigma := 0.3
	trueMedian := 1.0 // exp(0)
	covered, total := 0, 0
	for i := 0; i < sims; i++ {
		var x []float64
		for len(x) < minN || (relHalfWidth(x) > target && len(x) < maxN) {
			x = append(x, math.Exp(sigma*rng.NormFloat64()))
		}
		ci := stats.MedianCI(x, 0.95)
		total++
		if ci.Low <= trueMedian && trueMedian <= ci.High {
			covered++
		}
	}
	cov := float64(covered) / float64(total)
	t.Logf("coverage %.3f over %d simulated precision-driven cells", cov, total)
	// 2000 trials: a binomial standard error of ~0.5 points around 95%.
	if cov < 0.93 {
		t.Errorf("coverage %.3f: the stopping rule biases the intervals", cov)
	}
}

// With too little budget for every cell, the cells closest to the target
// get the rounds; with none able to make it, all go on.
func TestTriage(t *testing.T) {
	a, b, c := cellKey{0, "tcp_lat", 1}, cellKey{1, "tcp_lat", 1}, cellKey{2, "tcp_lat", 1}
	need := map[cellKey]int{a: 30, b: 4, c: 6}
	for _, tc := range []struct {
		left int
		want string
	}{
		{100, "[0 1 2]"}, // 3 cells × 30 rounds fit
		{20, "[1 2]"},    // 2 × 6 fit, 3 × 30 do not
		{5, "[1]"},       // only b's 4
		{2, "[0 1 2]"},   // nobody can make it: all go on
	} {
		var got []int
		for _, k := range triage([]cellKey{a, b, c}, need, tc.left) {
			got = append(got, k.arm)
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("steps left %d: %v, want %s", tc.left, got, tc.want)
		}
	}
}

// The progress log tells the truth in the precision phase: each round says
// how many cells are still too wide and which, and its steps count within
// the round against the budget left, never "[N/N] … (ETA 0s)" for minutes.
func TestPrecisionProgressLines(t *testing.T) {
	e := mustParse(t, precisionDoc)
	m := &noisyMeasurer{rng: rand.New(rand.NewPCG(1, 2)), n: map[string]int{}}
	var out strings.Builder
	if _, err := Execute(context.Background(), e, Options{Labs: &fakeLabs{}, Measurer: m, Sink: &memSink{}, Progress: &out}); err != nil {
		t.Fatal(err)
	}
	log := out.String()
	for _, want := range []string{
		"10 planned steps, about", "within a 1h0m0s budget",
		"[10/10] ", "(ETA 0s)",
		"precision round 1: 1 steps — 1 of 2 cells wider than ±5% (noisy tcp_lat 1B ±", "budget left 1h0m0s",
		"[precision round 1 1/1] noisy tcp_lat 1B #6: ",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("progress lacks %q:\n%s", want, log)
		}
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "[precision") && strings.Contains(line, "ETA") {
			t.Errorf("a precision round's step shows an ETA: %q", line)
		}
	}
}
