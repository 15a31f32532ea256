package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
)

// ComparisonRow is one arm × test × size × metric measured in both runs.
type ComparisonRow struct {
	Arm, Test string
	Size      int
	Column    Column
	A, B      *Cell
	Verdict   *stats.Verdict // nil when either side has no value
	Missing   string         // why there is no verdict
}

// Comparison matches two runs cell by cell. Verdicts are B relative to A.
func Comparison(runA *store.Run, samplesA []store.Sample, runB *store.Run, samplesB []store.Sample) (rows []ComparisonRow, mA, mB *Model) {
	mA, mB = Analyze(runA, samplesA), Analyze(runB, samplesB)
	inB := map[string]bool{}
	for _, a := range mB.Arms {
		inB[a] = true
	}
	gB := map[group]bool{}
	for _, g := range mB.Groups {
		gB[g] = true
	}
	for _, col := range columnsFor([]*Model{mA, mB}) {
		if !gB[group{col.Test, col.Size}] {
			continue
		}
		for _, arm := range mA.Arms {
			if !inB[arm] {
				continue
			}
			k := cellKey{arm, col.Test, col.Size, col.metric.Name}
			ca, cb := mA.cells[k], mB.cells[k]
			if ca == nil && cb == nil {
				continue
			}
			row := ComparisonRow{Arm: arm, Test: col.Test, Size: col.Size, Column: col, A: ca, B: cb}
			switch {
			case ca == nil || len(ca.Values) == 0:
				row.Missing = "A: " + mA.missingNote(arm, col)
			case cb == nil || len(cb.Values) == 0:
				row.Missing = "B: " + mB.missingNote(arm, col)
			default:
				v := stats.Judge(ca.Values, cb.Values, col.metric.HigherIsBetter)
				row.Verdict = &v
			}
			rows = append(rows, row)
		}
	}
	return rows, mA, mB
}

// Compare writes, for every arm, test and message size measured in both
// runs, both medians, the change in percent, the Mann–Whitney p-value and
// a verdict of B against A.
func Compare(w io.Writer, runA *store.Run, samplesA []store.Sample, runB *store.Run, samplesB []store.Sample) error {
	rows, mA, mB := Comparison(runA, samplesA, runB, samplesB)
	if len(rows) == 0 {
		return fmt.Errorf("runs %q and %q have no arm measured with the same test and message size; compare runs of the same experiment", runA.Name, runB.Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "A: %s\n   %s\n", runLine(runA), fingerprintLine(runA.Host))
	fmt.Fprintf(&b, "B: %s\n   %s\n\n", runLine(runB), fingerprintLine(runB.Host))
	g := grid{Header: []string{"arm", "test", "size", "metric", "A median ±CI", "B median ±CI", "Δ (%)", "p", "verdict (B vs A)"},
		Right: []bool{false, false, true, false, true, true, true, true, false}}
	var n notes
	for _, r := range rows {
		cells := []gcell{{Text: r.Arm}, {Text: r.Test}, {Text: FormatSize(r.Size)},
			{Text: fmt.Sprintf("%s (%s)", r.Column.metric.Label, displayUnit(r.Column.metric.Unit))}}
		cells = append(cells, cmpValue(r.A, r.Column), cmpValue(r.B, r.Column))
		if r.Verdict == nil {
			cells = append(cells, gcell{Text: "—"}, gcell{Text: "—"}, gcell{Text: "—", Note: n.add(r.Missing)})
		} else {
			better, worse := verdictWords(r.Column.metric.Metric)
			cells = append(cells, gcell{Text: fmt.Sprintf("%+.1f", r.Verdict.DeltaPct)},
				gcell{Text: stats.FormatP(r.Verdict.Test.P)}, gcell{Text: r.Verdict.Text(better, worse)})
		}
		g.Rows = append(g.Rows, cells)
	}
	// Compare shows raw metric units (no Gb/s scaling per column): both
	// runs' values sit in one column.
	b.WriteString(textTable(g, func(c gcell) string {
		if c.Note > 0 {
			return fmt.Sprintf("%s [%d]", c.Text, c.Note)
		}
		return c.Text
	}))
	fmt.Fprintf(&b, "Mann–Whitney U, two-sided, α=%.2g, on the repeats of each cell; Δ = (median B − median A) / median A.\n", stats.Alpha)
	if len(n.list) > 0 {
		fmt.Fprintln(&b, "\nNotes:")
		for i, t := range n.list {
			fmt.Fprintln(&b, wrap(fmt.Sprintf("  [%d] %s", i+1, t), 100, "      "))
		}
	}
	var warn []string
	for _, x := range []struct {
		tag string
		m   *Model
	}{{"A", mA}, {"B", mB}} {
		for _, f := range x.m.Flags {
			warn = append(warn, x.tag+": "+f.Message)
		}
	}
	if fa, fb := mA.Run.Host, mB.Run.Host; fa.Kernel != fb.Kernel || fa.CPUModel != fb.CPUModel || fa.Hostname != fb.Hostname {
		warn = append(warn, "the runs were taken on different hosts or kernels: a difference may be the environment, not the datapath")
	}
	if len(warn) > 0 {
		fmt.Fprintln(&b, "\nWarnings:")
		for _, s := range warn {
			fmt.Fprintln(&b, wrap("  ! "+s, 100, "    "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cmpValue(c *Cell, col Column) gcell {
	if c == nil || len(c.Values) == 0 {
		return gcell{Text: "—"}
	}
	med := c.Summary.Median
	dec := decimals(med)
	s := formatFixed(med, dec)
	if c.Summary.N >= 2 {
		s += " ±" + formatFixed(c.Summary.MedianCI.HalfWidth(med), dec)
	}
	if len(c.Flags) > 0 {
		s += " [" + strings.Join(c.Flags, ", ") + "]"
	}
	return gcell{Text: s}
}
