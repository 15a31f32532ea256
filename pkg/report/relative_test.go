package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
)

// outcomes runs the comparison of b against a and returns each compared
// arm's outcome on its test's primary metric (the bitrate).
func outcomes(t *testing.T, o Options, ra *store.Run, sa []store.Sample, rb *store.Run, sb []store.Sample) map[string]stats.Outcome {
	t.Helper()
	rows, _, _ := o.Comparison(ra, sa, rb, sb)
	out := map[string]stats.Outcome{}
	for _, r := range rows {
		if r.Column.metric.Name != primary(r.Test).Name {
			continue
		}
		if r.Verdict == nil {
			t.Fatalf("%s: no verdict: %s", r.Arm, r.Missing)
		}
		out[r.Arm] = r.Verdict.Outcome
	}
	return out
}

// A machine 12% faster in the second run moves every arm alike: absolute
// values differ, every arm's ratio to the baseline does not.
func TestRelativeCancelsDrift(t *testing.T) {
	ra, sa := ciliumRun(3, ubuntu20, 1)
	rb, sb := ciliumRun(4, ubuntu20, 1.12)
	abs := outcomes(t, Options{}, ra, sa, rb, sb)
	for _, arm := range []string{"native", "vxlan", "geneve"} {
		if abs[arm] != stats.OutcomeBetter {
			t.Errorf("absolute %s: %v, want better (the fixture is 12%% faster)", arm, abs[arm])
		}
	}
	rel := outcomes(t, Options{Relative: true}, ra, sa, rb, sb)
	if _, ok := rel["native"]; ok || len(rel) != 2 {
		t.Errorf("relative rows %v: want vxlan and geneve, not the baseline", rel)
	}
	for _, arm := range []string{"vxlan", "geneve"} {
		if rel[arm] != stats.Equivalent {
			t.Errorf("relative %s: %v, want equivalent", arm, rel[arm])
		}
	}
}

// One arm that really changed is still found: its ratio moves, the other's
// does not.
func TestRelativeFindsOneArmsChange(t *testing.T) {
	ra, sa := ciliumRun(3, ubuntu20, 1)
	rb, sb := ciliumRun(4, ubuntu20, 1)
	for i := range sb {
		if sb[i].Arm == "vxlan" {
			r := *sb[i].Result
			tp := *r.Throughput
			tp.ReceiverBps = result.F(*tp.ReceiverBps * 0.8)
			r.Throughput = &tp
			sb[i].Result = &r
		}
	}
	rel := outcomes(t, Options{Relative: true}, ra, sa, rb, sb)
	if rel["vxlan"] != stats.OutcomeWorse || rel["geneve"] != stats.Equivalent {
		t.Errorf("relative %v: want vxlan worse, geneve equivalent", rel)
	}
}

// The document says what its values are, in the table and in JSON.
func TestRelativeDocument(t *testing.T) {
	ra, sa := ciliumRun(3, ubuntu20, 1)
	rb, sb := ciliumRun(4, ubuntu20, 1.12)
	d, err := Options{Relative: true}.newComparison(FormatJSON, ra, sa, rb, sb)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Main.Rows[0][3].Text, "÷ native") || strings.Contains(d.Main.Rows[0][3].Text, "Mb/s") {
		t.Errorf("metric cell %q: want the ratio to native without the metric's unit", d.Main.Rows[0][3].Text)
	}
	var buf bytes.Buffer
	if err := d.Write(&buf, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc JSONComparison
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.RelativeTo != "native" || len(doc.Rows) == 0 || doc.Rows[0].Unit != RelativeUnit {
		t.Errorf("relative_to %q, rows %d, unit %q", doc.RelativeTo, len(doc.Rows), doc.Rows[0].Unit)
	}
	if m := *doc.Rows[0].A.Median; m < 0.2 || m > 0.3 {
		t.Errorf("vxlan/native median %v: want ≈ 3930/15800", m)
	}
}

// Without a baseline in both runs there is nothing to be relative to.
func TestRelativeNeedsBaseline(t *testing.T) {
	ra, sa := ciliumRun(3, ubuntu20, 1)
	rb, sb := ciliumRun(4, ubuntu20, 1)
	rb.Baseline = ""
	_, err := Options{Relative: true}.newComparison(FormatTable, ra, sa, rb, sb)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "baseline") {
		t.Errorf("err %v: want ErrInvalid naming the baseline", err)
	}
}

// The gate judges absolute values: asking it to judge ratios is refused
// before anything is read.
func TestRelativeRefusesGate(t *testing.T) {
	c := CompareCommand{DBPath: t.TempDir() + "/none.db", A: "1", B: "2", Format: FormatTable, FailOn: "slower>5%", Relative: true}
	if err := c.Run(&bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--relative") {
		t.Errorf("err %v: want ErrInvalid naming --relative", err)
	}
}
