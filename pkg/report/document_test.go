package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/stages"
)

// The document holds the page; the renderers only print it. A document
// built by hand, every section marked with its own text, must come out
// whole in each page format: a renderer that drops or invents a section
// fails here.
func TestEveryRendererPrintsEverySection(t *testing.T) {
	d := &Document{
		Title: "TITLE-1",
		Runs: []DocRun{{ID: 9, Label: "9 r", Line: "RUNLINE-1", Fingerprint: "FINGERPRINT-1", Kind: "lab", State: "complete",
			Started: "2026-11-22 03:00:00Z", Arms: []string{"ARM-1: topology native"}}},
		Main: Table{Header: []string{"arm", "HEADER-1 (µs)"}, Right: []bool{false, true}, LabelCols: 1, Sizes: []int{1},
			Rows: [][]TableCell{{{Text: "armA"}, {Text: "VALUE-1", Flags: []string{"FLAG-1"}}}, {{Text: "armB"}, {Text: "—", Note: 1}}}},
		Legend: []string{"LEGEND-1"},
		Verdicts: &VerdictSection{Baseline: "BASELINE-1", Method: "METHOD-1", Notes: []string{"VNOTE-1"},
			Table: Table{Header: []string{"vs BASELINE-1", "HEADER-1 (µs)"}, Right: []bool{false, true},
				Rows: [][]TableCell{{{Text: "armB"}, {Text: "VERDICT-1"}}}}},
		Notes:    []string{"NOTE-1"},
		Warnings: []Warning{{0, "WARNING-1"}, {-1, "WARNING-2"}},
		Stages:   []*stages.Report{{}},
		StagesCompared: &StageComparison{Heading: "STAGES-COMPARED-1:",
			Explanations: []stages.Explanation{{B: "B/armB", Test: "tcp_lat", Missing: "EXPLAINED-1"}}},
	}
	want := []string{"ARM-1", "HEADER-1", "VALUE-1 [FLAG-1]", "LEGEND-1", "BASELINE-1", "METHOD-1",
		"VERDICT-1", "VNOTE-1", "NOTE-1", "WARNING-1", "WARNING-2", "CPU by datapath stage", "STAGES-COMPARED-1", "EXPLAINED-1"}
	for _, f := range []string{FormatTable, FormatMarkdown, FormatHTML} {
		var b bytes.Buffer
		if err := d.Write(&b, f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		page := b.String()
		// HTML shows a run as a row of its runs table, the others as
		// its line and its host's.
		run := []string{"RUNLINE-1", "FINGERPRINT-1"}
		if f == FormatHTML {
			run = []string{"TITLE-1", "9 r", "2026-11-22 03:00:00Z"}
		}
		for _, w := range append(run, want...) {
			if !strings.Contains(page, w) {
				t.Errorf("%s lacks %q:\n%s", f, w, page)
			}
		}
		if f == FormatHTML {
			checkHTML(t, b.Bytes())
		}
	}
}

// A report's document: the verdict section only for one run with a
// baseline, warnings tied to their run, a chart per column.
func TestReportDocument(t *testing.T) {
	run, ss := kubeOVNRun()
	d, err := NewDocument([]Input{{run, ss}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdicts == nil || d.Verdicts.Baseline != "host" || len(d.Verdicts.Table.Rows) != 2 {
		t.Errorf("verdicts: %+v, want host against 2 arms", d.Verdicts)
	}
	if len(d.Main.Rows) != 3 || len(d.Main.Header) != 1+12 || len(d.Main.Sizes) != 12 || d.Main.LabelCols != 1 {
		t.Errorf("main table: %d rows, header %v, sizes %v", len(d.Main.Rows), d.Main.Header, d.Main.Sizes)
	}
	if len(d.Bars) != 12 || len(d.CDFs) != 6 {
		t.Errorf("%d bar and %d CDF charts, want 12 and 6", len(d.Bars), len(d.CDFs))
	}
	if len(d.Notes) == 0 || len(d.Warnings) == 0 {
		t.Errorf("notes %v, warnings %v: the fixture has a failed cell and no cpufreq", d.Notes, d.Warnings)
	}
	for _, w := range d.Warnings {
		if w.Run != 0 {
			t.Errorf("warning %q tied to run %d, want 0", w.Text, w.Run)
		}
	}

	r1, s1 := ciliumRun(3, ubuntu20, 1)
	r2, s2 := ciliumRun(4, opensuse15, 1.12)
	d, err = NewDocument([]Input{{r1, s1}, {r2, s2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdicts != nil {
		t.Error("side-by-side runs got a verdict section; ratios stay within each run")
	}
	if len(d.Warnings) != 1 || d.Warnings[0].Run != 1 || !strings.HasPrefix(d.Warnings[0].Text, "run 4: ") {
		t.Errorf("warnings %+v, want run 4's powersave warning", d.Warnings)
	}
	if _, err := NewDocument(nil, nil); err == nil {
		t.Error("a document of no runs")
	}
}

// compare builds the same kind of document: sides A and B, the host
// difference a warning of the whole page.
func TestCompareDocument(t *testing.T) {
	r1, s1 := ciliumRun(3, ubuntu20, 1)
	r2, s2 := ciliumRun(4, opensuse15, 1.12)
	rows, mA, mB := Comparison(r1, s1, r2, s2)
	d := compareDocument(rows, mA, mB)
	if len(d.Runs) != 2 || d.Runs[0].Tag != "A" || d.Runs[1].Tag != "B" {
		t.Fatalf("runs %+v", d.Runs)
	}
	if len(d.Main.Rows) != len(rows) || d.Verdicts != nil {
		t.Errorf("%d rows for %d compared cells; verdicts %v", len(d.Main.Rows), len(rows), d.Verdicts)
	}
	var bSide, whole int
	for _, w := range d.Warnings {
		switch w.Run {
		case 1:
			bSide++
		case -1:
			whole++
		}
	}
	if bSide != 1 || whole != 1 {
		t.Errorf("warnings %+v: want B's governor and the host difference", d.Warnings)
	}
}

// compare's stage section exists only when both runs were profiled.
func TestStageComparisonNeedsBothProfiles(t *testing.T) {
	for _, c := range []struct {
		a, b *stages.Report
	}{{nil, nil}, {nil, &stages.Report{}}, {&stages.Report{}, nil}, {&stages.Report{}, &stages.Report{}}} {
		if sc := stageComparison("A", c.a, "B", c.b); sc != nil {
			t.Errorf("stageComparison(%v, %v) = %+v, want nil", c.a, c.b, sc)
		}
	}
}
