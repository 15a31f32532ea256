package report

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
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

// Comparison is Options{}.Comparison.
func Comparison(runA *store.Run, samplesA []store.Sample, runB *store.Run, samplesB []store.Sample) (rows []ComparisonRow, mA, mB *Model) {
	return Options{}.Comparison(runA, samplesA, runB, samplesB)
}

// Comparison matches two runs cell by cell. Verdicts are B relative to A.
func (o Options) Comparison(runA *store.Run, samplesA []store.Sample, runB *store.Run, samplesB []store.Sample) (rows []ComparisonRow, mA, mB *Model) {
	mA, mB = o.Analyze(runA, samplesA), o.Analyze(runB, samplesB)
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
			var whyA, whyB string
			if o.Relative {
				if arm == mA.Baseline {
					continue // its ratio to itself is 1 in both
				}
				ca, whyA = mA.relativeCell(ca)
				cb, whyB = mB.relativeCell(cb)
			}
			row := ComparisonRow{Arm: arm, Test: col.Test, Size: col.Size, Column: col, A: ca, B: cb}
			switch {
			case ca == nil || len(ca.Values) == 0:
				row.Missing = "A: " + cmp.Or(whyA, mA.missingNote(arm, col))
			case cb == nil || len(cb.Values) == 0:
				row.Missing = "B: " + cmp.Or(whyB, mB.missingNote(arm, col))
			default:
				v := o.judge(ca.Values, cb.Values, col.metric.HigherIsBetter)
				row.Verdict = &v
			}
			rows = append(rows, row)
		}
	}
	return rows, mA, mB
}

// Compare writes, for every arm, test and message size measured in both
// runs, both medians, the change in percent, the Mann–Whitney p-value and
// a verdict of B against A, as a terminal table.
func Compare(w io.Writer, runA *store.Run, samplesA []store.Sample, runB *store.Run, samplesB []store.Sample) error {
	return CompareFormat(w, FormatTable, runA, samplesA, runB, samplesB)
}

// CompareFormats are the formats CompareFormat writes.
var CompareFormats = []string{FormatTable, FormatMarkdown, FormatJSON}

// CompareFormat is Compare in format table, markdown or json.
func CompareFormat(w io.Writer, format string, runA *store.Run, samplesA []store.Sample, runB *store.Run, samplesB []store.Sample) error {
	d, err := Options{}.newComparison(format, runA, samplesA, runB, samplesB)
	if err != nil {
		return err
	}
	return d.Write(w, format)
}

// newComparison is compare's document of run B against run A, once format
// is known to be one compare prints and the runs share a compared cell.
func (o Options) newComparison(format string, runA *store.Run, samplesA []store.Sample, runB *store.Run, samplesB []store.Sample) (*Document, error) {
	if !ValidCompareFormat(format) {
		return nil, fmt.Errorf("unknown compare format %q; use one of %s", format, strings.Join(CompareFormats, ", "))
	}
	rows, mA, mB := o.Comparison(runA, samplesA, runB, samplesB)
	if o.Relative {
		if err := checkRelative(mA, mB); err != nil {
			return nil, err
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("runs %q and %q have no arm measured with the same test and message size; compare runs of the same experiment", runA.Name, runB.Name)
	}
	d := compareDocument(rows, mA, mB)
	if o.Relative {
		d.relativeTo = mA.Baseline
		d.AnswerHeading = strings.Replace(d.AnswerHeading, "for each arm", "for each arm's ratio to its run's baseline "+mA.Baseline, 1)
		d.Title += fmt.Sprintf(", each arm relative to its run's baseline %s", mA.Baseline)
		d.Legend = append(d.Legend, fmt.Sprintf("Relative (--relative): a value is the arm's sample over the baseline %s's sample of the same round (×); Δ is that ratio's change from A to B, so a drift that moves every arm of a run alike cancels.", mA.Baseline))
		for _, row := range d.Main.Rows {
			if i := strings.LastIndex(row[3].Text, " ("); i > 0 {
				row[3].Text = row[3].Text[:i] // the metric's unit: the values are ratios now
			}
			row[3].Text += " ÷ " + mA.Baseline
		}
	}
	return d, nil
}

// CompareSchema names the JSON document of CompareFormat(…, "json", …).
const CompareSchema = "cnibench.compare/v1"

// JSONComparison is the JSON form of a comparison; verdicts are B against A.
type JSONComparison struct {
	Schema string `json:"schema"`
	// RelativeTo is the baseline arm every value is a ratio to (compare
	// --relative); absent when the values are the metrics' own.
	RelativeTo string           `json:"relative_to,omitempty"`
	A          JSONCompareRun   `json:"a"`
	B          JSONCompareRun   `json:"b"`
	Rows       []JSONCompareRow `json:"rows"`
	Warnings   []string         `json:"warnings"`
}

// JSONCompareRun identifies one side of a comparison.
type JSONCompareRun struct {
	ID       int64              `json:"id"`
	Name     string             `json:"name"`
	Complete bool               `json:"complete"`
	Host     result.Fingerprint `json:"host"`
}

// JSONCompareSide is one run's statistics of a compared cell.
type JSONCompareSide struct {
	N        int      `json:"n"`
	Median   *float64 `json:"median"`
	MedianCI JSONCI   `json:"median_ci"`
	CV       *float64 `json:"cv"`
	Flags    []string `json:"flags"`
}

// JSONCompareRow is one arm × test × size × metric in both runs.
type JSONCompareRow struct {
	CellID
	Unit           string           `json:"unit"`
	HigherIsBetter bool             `json:"higher_is_better"`
	A              *JSONCompareSide `json:"a"` // null: not measured in A (see missing)
	B              *JSONCompareSide `json:"b"`
	JSONVerdict
	Missing string `json:"missing,omitempty"`
}

func compareSide(c *Cell) *JSONCompareSide {
	if c == nil || len(c.Values) == 0 {
		return nil
	}
	return &JSONCompareSide{N: c.Summary.N, Median: num(c.Summary.Median), MedianCI: jci(c.Summary.MedianCI),
		CV: num(c.Summary.CV), Flags: append([]string{}, c.Flags...)}
}

// compareJSON is the JSON form of a comparison's document.
func compareJSON(d *Document) JSONComparison {
	side := func(m *Model) JSONCompareRun { return JSONCompareRun{m.Run.ID, m.Run.Name, m.Run.Complete, m.Run.Host} }
	doc := JSONComparison{Schema: CompareSchema, RelativeTo: d.relativeTo, A: side(d.models[0]), B: side(d.models[1]),
		Rows: []JSONCompareRow{}, Warnings: append([]string{}, d.warningTexts()...)}
	for _, r := range d.compare {
		mt := r.Column.metric
		unit := mt.Unit
		if d.relativeTo != "" {
			unit = RelativeUnit
		}
		doc.Rows = append(doc.Rows, JSONCompareRow{CellID: CellID{r.Arm, r.Test, r.Size, mt.Name}, Unit: unit,
			HigherIsBetter: mt.HigherIsBetter, A: compareSide(r.A), B: compareSide(r.B),
			JSONVerdict: jsonVerdict(r.Verdict, mt.Metric), Missing: r.Missing})
	}
	return doc
}
