package disrupt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// render is r in every format `disrupt report` writes.
func render(t *testing.T, r *Result) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range Formats {
		var b bytes.Buffer
		var err error
		switch f {
		case "json":
			err = writeJSON(&b, r)
		case "html":
			err = WriteHTML(&b, r)
		default:
			err = WriteText(&b, r)
		}
		if err != nil {
			t.Fatal(err)
		}
		out[f] = b.String()
	}
	return out
}

// A stored run reads back as the very result it was saved from: its JSON,
// text and HTML are byte for byte what the run printed; an arm that
// failed (no timelines) stays so, and the run is stored incomplete.
func TestStoreRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := fixtureResult()
	r.Schema, r.Spec = Schema, "name: fixture\n"
	r.Arms = append(r.Arms, &ArmResult{Name: "broken", Topology: "veth", LabID: "ab12"})
	want := render(t, r)
	run, err := Save(db, r, StoreOptions{Kind: KindLab, Version: "test", Err: errors.New("arm broken: lab up failed")})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{run.Name, "last", "1"} {
		got, stored, err := Stored(db, ref)
		if err != nil {
			t.Fatalf("Stored(%q): %v", ref, err)
		}
		for f, text := range render(t, got) {
			if text != want[f] {
				t.Errorf("Stored(%q) renders %s differently:\n%s\nwant:\n%s", ref, f, text, want[f])
			}
		}
		if stored.Kind != KindLab || stored.ExperimentName != "fixture" || stored.Experiment != r.Spec || stored.Complete ||
			stored.Status != "arm broken: lab up failed" || !stored.Started.Equal(r.Started) || len(stored.Arms) != 3 {
			t.Errorf("stored run = %+v", stored)
		}
	}
	// The command reads a run the same way.
	for _, f := range Formats {
		var b bytes.Buffer
		if err := (&ReportCommand{Ref: run.Name, DB: path, Format: f}).Run(&b); err != nil || b.String() != want[f] {
			t.Errorf("disrupt report %s --format %s: %v\n%s", run.Name, f, err, b.String())
		}
	}
	// Neither a file nor a database: one line, and no database made.
	none := filepath.Join(t.TempDir(), "none.db")
	if err := (&ReportCommand{Ref: "last", DB: none, Format: "text"}).Run(&bytes.Buffer{}); !errors.Is(err, store.ErrNoDatabase) {
		t.Errorf("no database: %v", err)
	}
	if _, err := os.Stat(none); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading made a database: %v", err)
	}
	// The events' figures are samples: two events per measured arm.
	ss, err := db.Samples(run.ID)
	if err != nil || len(ss) != 4 {
		t.Fatalf("samples = %+v, %v", ss, err)
	}
	d := ss[0].Result.Disruption
	e := r.Arms[0].Timelines[0].Events[0]
	if ss[0].Test != "disrupt/udp-rr/endpoint-change" || ss[0].Arm != "ipt" || d.LongestGapMs != e.LongestGapMs ||
		d.Lost != e.Failed+e.Timeouts || d.Lost == 0 || *d.AgentCPUMs != 12 || ss[1].Repeat != 1 || ss[1].Result.Disruption.Label != "revert" {
		t.Errorf("first sample %+v: %+v", ss[0], d)
	}
	if ss[0].Result.Missing["disruption.p99_us"] != "" || d.P99Us == nil {
		t.Errorf("a measured p99 reported missing: %v", ss[0].Result.Missing)
	}
}

// Two stored disruption runs compare as any two runs do: each event kind's
// figures are cells with values on both sides.
func TestStoredRunsCompare(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var runs [2]*store.Run
	for i := range runs {
		r := fixtureResult()
		r.Schema = Schema
		if runs[i], err = Save(db, r, StoreOptions{Kind: KindLab, Version: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	a, sa, err := db.Load(runs[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	b, sb, err := db.Load(runs[1].Name)
	if err != nil {
		t.Fatal(err)
	}
	rows, _, _ := report.Comparison(a, sa, b, sb)
	seen := map[string]bool{}
	for _, row := range rows {
		if row.Test == result.DisruptionTest("udp-rr", "endpoint-change") && row.A != nil && len(row.A.Values) == 2 && row.B != nil {
			seen[row.Arm+" "+row.A.Metric] = true
		}
	}
	for _, want := range []string{"ipt longest_gap_ms", "ipt lost", "ipt recover_ms", "ipt p99_us", "ipt agent_cpu_ms", "nft longest_gap_ms"} {
		if !seen[want] {
			t.Errorf("no compared cell %s; have %v", want, seen)
		}
	}
}

// A run that is not a disruption run, and one that is not there: one line
// each, saying what to do.
func TestStoredRefusals(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.CreateRun(&store.Run{Name: "lab-run", Kind: store.KindLab}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Stored(db, "lab-run"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "cnibench report lab-run") {
		t.Errorf("a lab run: %v", err)
	}
	if _, _, err := Stored(db, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown run: %v", err)
	}
}

// Nothing measured, nothing to store: a run whose arms all failed before
// their probes were judged.
func TestMeasured(t *testing.T) {
	if Measured(nil) || Measured(&Result{Arms: []*ArmResult{{Name: "a"}}}) || !Measured(fixtureResult()) {
		t.Error("Measured is wrong")
	}
}
