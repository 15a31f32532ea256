package pressure

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
)

// fixture is a run as `cnibench pressure` prints it, built by hand: a
// conntrack arm whose ramps hit a full table (held flows 0 and 12000, the
// first twice), a notrack arm with no knee, and an arm whose ramp failed
// after its first step. kneeScale moves the conntrack arm's rates, so two
// fixtures differ where a comparison can see it.
func fixture(kneeScale float64) *Document {
	f := result.F
	ns := func(count, max int64, drop uint64) []NSCounters {
		return []NSCounters{
			{Netns: "cnb-ab12-node1", Role: "node1", Conntrack: true, Count: count, Max: max, Stats: &ConntrackStats{Found: 3, Drop: drop},
				TCP: map[string]int64{"TcpExt.TCPSynRetrans": int64(drop / 2)}},
			{Netns: "cnb-ab12-server", Role: "server", TCP: map[string]int64{"TcpExt.ListenOverflows": 0}},
		}
	}
	step := func(offered, achieved float64, drop uint64) Step {
		s := Step{OfferedRate: offered, AchievedRate: achieved, StepCounts: StepCounts{Attempted: int64(2 * offered), Completed: int64(2 * achieved)},
			P50Ms: f(0.4), P99Ms: f(1.25), ClientCPU: 0.12, HostCPUBusy: f(0.61), Namespaces: ns(int64(achieved*4), 16384, drop), OK: drop == 0}
		if drop > 0 {
			s.FailedShare = 0.4
		}
		return s
	}
	knee := func(lastGood, failed float64) *Knee {
		return &Knee{LastGoodRate: f(lastGood), FailedOffered: failed, Cause: "conntrack_full",
			Evidence: []string{"node1 (cnb-ab12-node1): conntrack count 16384 of nf_conntrack_max 16384; 900 packets dropped"}}
	}
	k := kneeScale
	ramp := func(flows, repeat int, good float64) Ramp {
		return Ramp{Flows: flows, Repeat: repeat, LabID: "ab12", Held: Held{Asked: flows, Established: int64(flows), OpenSeconds: 1.5},
			Sources: []string{"10.244.1.2", "10.244.1.211"},
			Steps:   []Step{step(1000, 999.5, 0), step(2000*k, good*k, 0), step(4000*k, 1331*k, 900)}, Knee: knee(good*k, 4000*k)}
	}
	return &Document{Schema: Schema, Experiment: "conntrack-limits", Started: "2026-11-27T08:00:00Z",
		Config: Config{Flows: []int{0, 12000}, Rates: []int{1000, 2000, 4000}, Step: Duration(2 * time.Second), MaxInflight: 4096, FailShare: 0.01, Sources: 4, Repeats: 2},
		Arms: []ArmResult{
			{Arm: "conntrack-16k", Topology: "native", Knobs: map[string]string{"conntrack": "on", "conntrack_max": "16384"},
				Ramps: []Ramp{ramp(0, 1, 1998), ramp(12000, 1, 1990), ramp(0, 2, 2001)}},
			{Arm: "notrack", Topology: "native", Knobs: map[string]string{"notrack": "10.244.0.0/16"}, Ramps: []Ramp{{Flows: 0, Repeat: 1,
				Sources: []string{"10.244.1.2"}, SourcesNote: "one address", Steps: []Step{step(1000, 1000, 0), step(2000, 1999, 0)},
				NoKnee: "every step held, up to 2000/s offered"}}},
			{Arm: "broken", Topology: "native", Ramps: []Ramp{{Flows: 0, Repeat: 1, Steps: []Step{step(1000, 1000, 0)},
				Error: "step 2000/s: server pod gone"}}},
		}}
}

// tempDB is a new results database in the test's directory.
func tempDB(t *testing.T) (*store.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

// render is d in both formats `cnibench pressure` prints.
func render(t *testing.T, d *Document) (text, js string) {
	t.Helper()
	var tb, jb bytes.Buffer
	WriteText(&tb, d)
	if err := WriteJSON(&jb, d); err != nil {
		t.Fatal(err)
	}
	return tb.String(), jb.String()
}

// A stored run reads back as the very document it was saved from: its
// text and JSON are byte for byte what the run printed; the run is stored
// incomplete with its error, and each ramp that ran to its end is a sample
// with its knee and peak.
func TestStoreRoundTrip(t *testing.T) {
	db, path := tempDB(t)
	d := fixture(1)
	wantText, wantJSON := render(t, d)
	run, err := Save(db, d, StoreOptions{Version: "test", Experiment: "name: conntrack-limits\n", Baseline: "conntrack-16k",
		Err: errors.New("pressure ramps failed: 1 ramps did not run to their end")})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{run.Name, "last", "1"} {
		got, stored, err := Stored(db, ref)
		if err != nil {
			t.Fatalf("Stored(%q): %v", ref, err)
		}
		if text, js := render(t, got); text != wantText || js != wantJSON {
			t.Errorf("Stored(%q) renders differently:\n%s\n%s\nwant:\n%s\n%s", ref, text, js, wantText, wantJSON)
		}
		if stored.Kind != Kind || stored.ExperimentName != "conntrack-limits" || stored.Experiment != "name: conntrack-limits\n" ||
			stored.Complete || !strings.Contains(stored.Status, "1 ramps did not") || stored.Started.UTC().Format(time.RFC3339) != d.Started ||
			stored.Baseline != "conntrack-16k" || len(stored.Arms) != 3 {
			t.Errorf("stored run = %+v", stored)
		}
	}
	// The command prints the same, to stdout and to -o.
	for _, asJSON := range []bool{false, true} {
		want := map[bool]string{false: wantText, true: wantJSON}[asJSON]
		var b bytes.Buffer
		if err := (&ReportCommand{Ref: run.Name, DB: path, JSON: asJSON}).Run(&b); err != nil || b.String() != want {
			t.Errorf("pressure report %s (json %v): %v\n%s", run.Name, asJSON, err, b.String())
		}
		out := filepath.Join(t.TempDir(), "out")
		if err := (&ReportCommand{Ref: "last", DB: path, JSON: asJSON, Output: out}).Run(&bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(out); err != nil || string(b) != want {
			t.Errorf("pressure report -o (json %v): %v\n%s", asJSON, err, b)
		}
	}
	// Four ramps ran to their end: three of conntrack-16k, one of
	// notrack; the broken arm's ramp is in the document only.
	ss, err := db.Samples(run.ID)
	if err != nil || len(ss) != 4 {
		t.Fatalf("samples = %+v, %v", ss, err)
	}
	p := ss[0].Result.Pressure
	if ss[0].Test != "pressure/0" || ss[0].Arm != "conntrack-16k" || ss[0].Repeat != 0 || p == nil || p.KneePerS == nil || *p.KneePerS != 1998 ||
		p.PeakPerS != 1998 || *p.FailedOfferedPerS != 4000 || p.Cause != "conntrack_full" || ss[0].Result.DurationSeconds != 6 {
		t.Errorf("first sample %+v: %+v", ss[0], p)
	}
	if ss[1].Test != "pressure/12000" || ss[1].Repeat != 0 || ss[2].Test != "pressure/0" || ss[2].Repeat != 1 || *ss[2].Result.Pressure.KneePerS != 2001 {
		t.Errorf("samples 1, 2: %+v %+v", ss[1], ss[2])
	}
	nt := ss[3].Result
	if ss[3].Arm != "notrack" || nt.Pressure.KneePerS != nil || nt.Pressure.PeakPerS != 1999 ||
		nt.Missing["pressure.knee_per_s"] != "no knee: every step held, up to 2000/s offered" {
		t.Errorf("no-knee sample %+v: %+v, missing %v", ss[3], nt.Pressure, nt.Missing)
	}
}

// A ramp whose first step already failed has a peak but no knee rate, and
// says why.
func TestRampResultFirstStepFailed(t *testing.T) {
	d := fixture(1)
	r := d.Arms[0].Ramps[0]
	r.Knee = &Knee{FailedOffered: 1000, Cause: "host_cpu"}
	res := rampResult(d, time.Now(), &r, "test")
	if res.Pressure.KneePerS != nil || res.Pressure.Cause != "host_cpu" || res.Missing["pressure.knee_per_s"] != "the first step, 1000/s offered, already failed (host_cpu)" {
		t.Errorf("%+v, missing %v", res.Pressure, res.Missing)
	}
	if _, ok := result.Metrics["knee_per_s"].Get(res); ok {
		t.Error("a missing knee reads as a value")
	}
}

// Nothing measured, nothing to store: a run whose ramps all failed before
// their first step.
func TestMeasured(t *testing.T) {
	failed := &Document{Arms: []ArmResult{{Arm: "a", Ramps: []Ramp{{Error: "lab up failed"}}}}}
	if Measured(nil) || Measured(failed) || Measured(&Document{}) || !Measured(fixture(1)) {
		t.Error("Measured is wrong")
	}
}

// A run that is not a pressure run, one whose document is another kind's,
// one that is not there, and no database at all: one line each, saying
// what to do, and reading makes no database.
func TestStoredRefusals(t *testing.T) {
	db, path := tempDB(t)
	if _, err := db.CreateRun(&store.Run{Name: "lab-run", Kind: store.KindLab}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveRecord(&store.Record{Run: &store.Run{Name: "disrupt-run", Kind: "disrupt"},
		Document: &store.Document{Schema: "cnibench.disruption/v1", JSON: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{"lab-run": "cnibench report lab-run", "disrupt-run": `"cnibench.disruption/v1" document`} {
		if _, _, err := Stored(db, ref); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: want %q, got %v", ref, want, err)
		}
	}
	if _, _, err := Stored(db, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown run: %v", err)
	}
	none := filepath.Join(filepath.Dir(path), "none.db")
	if err := (&ReportCommand{Ref: "last", DB: none}).Run(&bytes.Buffer{}); !errors.Is(err, store.ErrNoDatabase) {
		t.Errorf("no database: %v", err)
	}
	if _, err := os.Stat(none); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading made a database: %v", err)
	}
	if _, err := Record(&Document{Schema: Schema, Started: "yesterday"}, StoreOptions{}); err == nil {
		t.Error("a document with no start time was stored")
	}
}

// Two stored pressure runs compare as any two runs do — each held-flows
// value's knee and peak are cells with values on both sides, and the
// conntrack arm's knee is 25% lower in B, where higher is better — and history
// reads them as one experiment's series.
func TestStoredRunsCompareAndHistory(t *testing.T) {
	db, _ := tempDB(t)
	var runs [2]*store.Run
	for i, scale := range []float64{1, 0.75} {
		d := fixture(scale)
		d.Started = time.Date(2026, 11, 27, 8, i, 0, 0, time.UTC).Format(time.RFC3339)
		var err error
		if runs[i], err = Save(db, d, StoreOptions{Version: "test", Baseline: "conntrack-16k"}); err != nil {
			t.Fatal(err)
		}
	}
	var in []report.Input
	for _, r := range runs {
		run, ss, err := db.Load(r.Name)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, report.Input{Run: run, Samples: ss})
	}
	rows, _, _ := report.Comparison(in[0].Run, in[0].Samples, in[1].Run, in[1].Samples)
	seen := map[string]*report.ComparisonRow{}
	for i, row := range rows {
		if row.A != nil && len(row.A.Values) > 0 && row.B != nil && len(row.B.Values) > 0 {
			seen[row.Arm+" "+row.Test+" "+row.A.Metric] = &rows[i]
		}
	}
	for _, want := range []string{"conntrack-16k pressure/0 knee_per_s", "conntrack-16k pressure/0 peak_per_s",
		"conntrack-16k pressure/12000 knee_per_s", "notrack pressure/0 peak_per_s"} {
		if seen[want] == nil {
			t.Errorf("no compared cell %s; have %v", want, seen)
		}
	}
	if r := seen["conntrack-16k pressure/0 knee_per_s"]; r != nil && (len(r.A.Values) != 2 || r.Verdict == nil || math.Abs(r.Verdict.DeltaPct+25) > 1e-9 || !r.A.HigherIsBetter) {
		t.Errorf("knee of pressure/0: A %v, B %v, verdict %+v", r.A.Values, r.B.Values, r.Verdict)
	}
	if seen["notrack pressure/0 knee_per_s"] != nil {
		t.Error("notrack had no knee, yet its knee compared")
	}
	h := report.BuildHistory("conntrack-limits", in, stats.EDivisiveOptions{})
	series := map[string]bool{}
	for _, s := range h.Series {
		if len(s.Points) == 2 && s.Points[0].Median != nil && s.Points[1].Median != nil {
			series[s.Arm+" "+s.Test+" "+s.Metric] = true
		}
	}
	if len(h.Runs) != 2 || h.Runs[0].Kind != Kind || !series["conntrack-16k pressure/12000 knee_per_s"] || !series["notrack pressure/0 peak_per_s"] {
		t.Errorf("history runs %+v, series %v", h.Runs, series)
	}
}
