package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
)

// historyRuns is a synthetic 30-run history of an experiment "nightly"
// with two arms and tcp_lat: "vxlan" gets 12% slower from run 18 on, when
// the kernel changes; "host" stays flat. Noise: 2% between runs, 1%
// between repeats; fixed seed.
func historyRuns() []Input {
	rng := rand.New(rand.NewPCG(11, 13))
	var in []Input
	for i := 0; i < 30; i++ {
		host := result.Fingerprint{Hostname: "ci1", Kernel: "6.1.0", Distro: "Debian GNU/Linux 12 (bookworm)", CPUModel: "AMD EPYC", Cores: 2, Cnibench: "v1"}
		step := 1.0
		if i >= 18 {
			host.Kernel, step = "6.18.4", 1.12
		}
		started := t0.Add(time.Duration(i) * 24 * time.Hour)
		run := &store.Run{ID: int64(100 + i), Name: "nightly-" + started.Format("20060102T150405Z"), ExperimentName: "nightly", Kind: store.KindLab,
			Baseline: "host", Complete: true, Status: "ok", Started: started, Finished: started.Add(time.Minute), Host: host,
			Arms: []store.Arm{{Name: "host", Topology: "host", Engine: "builtin"}, {Name: "vxlan", Topology: "vxlan", Engine: "builtin"}}}
		var ss []store.Sample
		levels := map[string]float64{"host": 20 * (1 + 0.02*rng.NormFloat64()), "vxlan": 30 * step * (1 + 0.02*rng.NormFloat64())}
		for rep := 0; rep < 5; rep++ {
			for _, arm := range []string{"host", "vxlan"} {
				v := levels[arm] * (1 + 0.01*rng.NormFloat64())
				ss = append(ss, store.Sample{RunID: run.ID, Seq: len(ss), Arm: arm, Test: result.TCPLat, MsgSize: 1, Repeat: rep,
					Engine: "builtin", Result: latResult(result.TCPLat, 1, v, 0.1, "cnibench")})
			}
		}
		in = append(in, Input{Run: run, Samples: ss})
	}
	// Stored order is not start order: BuildHistory sorts.
	in[3], in[7] = in[7], in[3]
	return in
}

// The experiment is the run's stored column, not something read back out
// of its name (store's migration 4 gave runs stored before it theirs).
func TestExperimentOf(t *testing.T) {
	if got := ExperimentOf(&store.Run{Name: "default-20261125T060421Z", ExperimentName: "nightly"}); got != "nightly" {
		t.Errorf("ExperimentOf = %q, want the stored nightly", got)
	}
	if got := ExperimentOf(&store.Run{Name: "default-20261125T060421Z"}); got != "" {
		t.Errorf("a run stored without an experiment: %q", got)
	}
}

func TestHistoryFindsTheStepAndTheKernelChange(t *testing.T) {
	h := BuildHistory("nightly", historyRuns(), stats.EDivisiveOptions{})
	if len(h.Runs) != 30 || h.Runs[3].ID != 103 || h.Runs[7].ID != 107 {
		t.Fatalf("runs not in start order: %d runs, #4 = %d", len(h.Runs), h.Runs[3].ID)
	}
	if got := h.Runs[18].Changed; len(got) != 1 || got[0] != "kernel 6.1.0 → 6.18.4" {
		t.Errorf("run 19's fingerprint change: %q", got)
	}
	byArm := map[string]HistorySeries{}
	for _, s := range h.Series {
		if s.Metric == mOneWay.Name {
			byArm[s.Arm] = s
		}
	}
	if cps := byArm["host"].ChangePoints; len(cps) != 0 {
		t.Errorf("flat arm: change points %+v", cps)
	}
	cps := byArm["vxlan"].ChangePoints
	if len(cps) != 1 {
		t.Fatalf("stepped arm: change points %+v", cps)
	}
	c := cps[0]
	if c.Run != 18 || c.RunID != 118 || c.Direction != "worse" || math.Abs(c.ChangePct-12) > 3 || c.P > 0.05 ||
		len(c.HostChanged) != 1 || !strings.HasPrefix(c.HostChanged[0], "kernel") {
		t.Errorf("stepped arm: %+v", c)
	}

	var txt, js, page bytes.Buffer
	for f, w := range map[string]*bytes.Buffer{FormatTable: &txt, FormatJSON: &js, FormatHTML: &page} {
		if err := WriteHistory(w, f, h); err != nil {
			t.Fatal(f, err)
		}
	}
	golden(t, "history.txt", txt.Bytes())
	golden(t, "history.html", page.Bytes())
	var doc History
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || doc.Schema != HistorySchema || len(doc.Series) != len(h.Series) {
		t.Errorf("JSON: %v %+v", err, doc.Schema)
	}
	if n := strings.Count(page.String(), `stroke="#e15759"`); n != 1 {
		t.Errorf("HTML: %d change-point lines, want 1", n)
	}
	if err := WriteHistory(&txt, "csv", h); err == nil {
		t.Error("csv accepted")
	}
}

// Too few runs: no change-point test, and it says so; a run without the
// cell leaves a gap, not a zero.
func TestHistoryShortAndGaps(t *testing.T) {
	in := historyRuns()[:5]
	var kept []store.Sample
	for _, s := range in[2].Samples {
		if s.Arm != "vxlan" {
			kept = append(kept, s)
		}
	}
	in[2].Samples = kept
	h := BuildHistory("nightly", in, stats.EDivisiveOptions{})
	for _, s := range h.Series {
		if !strings.Contains(s.NotTested, "at least 6") {
			t.Errorf("%s: NotTested = %q", s.name(), s.NotTested)
		}
		if s.Arm == "vxlan" && s.Points[2].Median != nil {
			t.Errorf("missing run has a value: %+v", s.Points[2])
		}
	}
	if got := Sparkline([]float64{1, 2, math.NaN(), 8}, []int{3}); got != "▁▂ │█" {
		t.Errorf("Sparkline = %q", got)
	}
	if got := Sparkline([]float64{5, 5}, nil); got != "▅▅" {
		t.Errorf("flat Sparkline = %q", got)
	}
	_ = fmt.Sprint()
}

// A history names its runs' kinds when they are not all lab runs (whose
// text stays as it was: the goldens above), and a disruption experiment's
// runs give a series per event figure.
func TestHistoryNamesKinds(t *testing.T) {
	in := historyRuns()
	in[0].Run.Kind, in[1].Run.Kind = "disrupt", "disrupt"
	var txt bytes.Buffer
	if err := WriteHistory(&txt, FormatTable, BuildHistory("nightly", in, stats.EDivisiveOptions{})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "30 stored runs (disrupt 2, lab 28)") {
		t.Errorf("mixed kinds not named:\n%s", txt.String())
	}
	var runs []Input
	for i := 0; i < 3; i++ {
		started := t0.Add(time.Duration(i) * time.Hour)
		run := &store.Run{ID: int64(i + 1), Name: fmt.Sprint("d", i), ExperimentName: "bh", Kind: "disrupt", Baseline: "veth",
			Complete: true, Started: started, Arms: []store.Arm{{Name: "veth", Topology: "veth", Engine: "builtin"}}}
		test := result.DisruptionTest("udp-rr", "blackhole")
		r := result.New(result.Tool{Name: "cnibench"}, test, 0)
		r.Disruption = &result.Disruption{Probe: "udp-rr", Event: "blackhole", LongestGapMs: 200 + float64(i), Lost: 200}
		runs = append(runs, Input{Run: run, Samples: []store.Sample{{RunID: run.ID, Arm: "veth", Engine: "builtin", Test: test, Result: r}}})
	}
	h := BuildHistory("bh", runs, stats.EDivisiveOptions{})
	if h.Runs[0].Kind != "disrupt" {
		t.Errorf("run kind %q", h.Runs[0].Kind)
	}
	var gap *HistorySeries
	for i, s := range h.Series {
		if s.Metric == "longest_gap_ms" {
			gap = &h.Series[i]
		}
	}
	if gap == nil || len(gap.Points) != 3 || *gap.Points[2].Median != 202 {
		t.Fatalf("no gap series: %+v", h.Series)
	}
	txt.Reset()
	if err := WriteHistory(&txt, FormatTable, h); err != nil || !strings.Contains(txt.String(), "3 stored runs (disrupt)") {
		t.Errorf("%v\n%s", err, txt.String())
	}
}
