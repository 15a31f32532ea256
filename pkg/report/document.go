package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/stats"
)

// A Document is one report page, laid out once from analysed runs and
// printed by every renderer: the terminal table, markdown and HTML print
// its sections (each in its own order and markup), JSON and CSV print the
// cells of its runs. A renderer decides how a section looks, never what is
// in it, so the formats cannot drift apart; `report` and `compare` build
// the same kind of document.
type Document struct {
	// Title names the page (HTML's <title> and heading).
	Title string
	// Answers lead the page: one line per comparison, under
	// AnswerHeading.
	AnswerHeading string
	Answers       []Answer
	// Runs identifies each run and its host, in page order.
	Runs []DocRun
	// Main is the results table.
	Main Table
	// Legend says how to read Main's cells, a paragraph a line.
	Legend []string
	// Verdicts tests each arm against the baseline (one run with a
	// baseline and another arm); nil otherwise.
	Verdicts *VerdictSection
	// Notes are the footnotes table cells point at (TableCell.Note, from 1).
	Notes []string
	// Warnings are about the trustworthiness of the numbers.
	Warnings []Warning
	// Bars is a chart per column of Main, CDFs a round-trip latency
	// distribution per latency group that recorded one (HTML draws them).
	Bars []BarChart
	CDFs []CDFChart
	// Stages is CPU by datapath stage of each profiled run (--profile).
	Stages []*stages.Report
	// StagesCompared is each arm's CPU by stage in run B against itself
	// in run A, when both compared runs were profiled; nil otherwise.
	StagesCompared *StageComparison

	// The data behind the page, for the formats that print the data
	// rather than the page (JSON, CSV).
	models []*Model
	// compare holds a comparison's rows (nil for a report): its JSON is
	// the cnibench.compare/v1 document.
	compare []ComparisonRow
	// relativeTo is the baseline a relative comparison's values are
	// ratios to ("" for absolute values).
	relativeTo string
}

// DocRun is one run's identity on a page.
type DocRun struct {
	// Tag is the run's side in a comparison ("A", "B"), else "".
	Tag   string
	ID    int64
	Label string // "3 cilium-ubuntu20"
	// Line is the run in one line (name, kind, start, state, duration),
	// Fingerprint its host in one line.
	Line, Fingerprint string
	Kind, State       string
	Started           string // UTC, seconds
	Host              result.Fingerprint
	// Complete and Status are the run's state and its status line.
	Complete bool
	Status   string
	// IdleWakeup is the host's idle wake-up penalty in one line ("" when
	// the run did not measure it).
	IdleWakeup string
	// Conditions is how every arm was measured, when that was the same
	// for all of them (then Arms leave it out); "" otherwise.
	Conditions string
	// Arms describes each arm: topology, engine, knobs, how it was measured.
	Arms []string
}

// Table is a table of text cells.
type Table struct {
	Header []string
	Rows   [][]TableCell
	// Right marks the numeric columns (right-aligned); nil: none.
	Right []bool
	// LabelCols is how many columns come before the value columns, and
	// Sizes each value column's message size: a renderer short of width
	// may print one table per size (the terminal does). Sizes is nil for a
	// table that must stay whole.
	LabelCols int
	Sizes     []int
	// Stated marks the label columns whose values the page states
	// elsewhere (each run's line names its host, distro and kernel): the
	// terminal, short of width, leaves them out.
	Stated []bool
}

func (t Table) right(i int) bool { return i < len(t.Right) && t.Right[i] }

// TableCell is one cell: its text, its flags ([noisy], [steal] …), and the
// footnote saying why it is empty (Note > 0, into Document.Notes).
type TableCell struct {
	Text  string
	Flags []string
	Note  int
	// Whole keeps the text on one line in a narrow terminal (a sparkline,
	// whose spaces are runs without a value).
	Whole bool
}

// String is the cell as every format prints it: "text [flag, flag]".
func (c TableCell) String() string {
	if len(c.Flags) == 0 {
		return c.Text
	}
	return c.Text + " [" + strings.Join(c.Flags, ", ") + "]"
}

// VerdictSection tests each arm against the baseline arm, cell by cell.
type VerdictSection struct {
	Baseline string
	// Method names the test and how to read its cells.
	Method string
	Table  Table
	// Notes explain verdicts that could not be significant.
	Notes []string
}

// StageComparison explains, stage by stage, what each arm's CPU per unit
// of work did between two profiled runs.
type StageComparison struct {
	Heading      string
	Explanations []stages.Explanation
}

// stageComparison compares the CPU by stage of two runs; nil unless both
// were profiled and share a profiled arm, test and size.
func stageComparison(nameA string, a *stages.Report, nameB string, b *stages.Report) *StageComparison {
	if a == nil || b == nil {
		return nil
	}
	// Short labels keep the table narrow: A and B are named in the heading.
	es := stages.CompareRuns(a.Cells, b.Cells, "A", "B")
	if len(es) == 0 {
		return nil
	}
	return &StageComparison{Explanations: es,
		Heading: fmt.Sprintf("CPU by datapath stage, each arm of B against itself in A (both runs profiled; A = %s, B = %s):", nameA, nameB)}
}

// Warning is a warning line; Run is the index into Document.Runs of the run
// it is about, or -1 for the whole page.
type Warning struct {
	Run  int
	Text string
}

// BarChart is one column of the main table as bars, one per arm (per run).
type BarChart struct {
	Title, Unit string
	Bars        []Bar
}

// Bar is one arm's median with its 95% confidence interval, or why there
// is none.
type Bar struct {
	Label             string
	Median, Low, High float64
	Missing           string
}

// CDFChart is the round-trip latency distribution of each arm in one
// (test, size) group.
type CDFChart struct {
	Name   string // "tcp_lat 1K"
	Series []CDFSeries
	// Missing lists the arms without a distribution.
	Missing []string
}

// CDFSeries is one arm's distribution up to p99.9.
type CDFSeries struct {
	Label string
	Color string // the arm's colour in the bar charts too
	Pts   []result.CDFPoint
}

// verdictMethod is how the verdict tables decide, for a margin.
func verdictMethod(margin float64) string {
	return fmt.Sprintf("equivalent %s: the %.0f%% interval of the ratio lies within the margin (two one-sided tests); "+
		"faster/slower: Mann–Whitney U, two-sided, α=%.2g; undecided: neither, ≈N more = samples per arm estimated to decide it",
		stats.MarginText(margin), stats.EquivLevel*100, stats.Alpha)
}

// NewDocument is Options{}.NewDocument.
func NewDocument(in []Input, st []*stages.Report) (*Document, error) {
	return Options{}.NewDocument(in, st)
}

// NewDocument analyses each run and lays out its report: one run, or
// several side by side. st[i] is run i's CPU by stage (nil, or a nil
// entry, for runs taken without --profile).
func (o Options) NewDocument(in []Input, st []*stages.Report) (*Document, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("report: no run given")
	}
	models := make([]*Model, len(in))
	for i, x := range in {
		models[i] = o.Analyze(x.Run, x.Samples)
		if i < len(st) {
			models[i].Stages = st[i]
		}
	}
	return reportDocument(models), nil
}

func reportDocument(models []*Model) *Document {
	d := &Document{Title: "cnibench report", models: models}
	if len(models) == 1 {
		d.Title += ": run " + runLabel(models[0].Run)
	}
	var n notes
	cols := d.mainTable(models, &n)
	d.Legend = legend(models, cols)
	if len(models) == 1 {
		d.Verdicts = verdictSection(models[0])
	}
	for _, m := range models {
		as := reportAnswers(m)
		if len(as) == 0 {
			continue
		}
		if len(models) > 1 {
			for i := range as {
				as[i].Subject = fmt.Sprintf("run %d: %s", m.Run.ID, as[i].Subject)
			}
		}
		d.Answers = append(d.Answers, as...)
	}
	if len(d.Answers) > 0 {
		against := "its run's baseline"
		if len(models) == 1 {
			against = models[0].Baseline
		}
		d.AnswerHeading = fmt.Sprintf("The answer, each arm against %s (equivalent: the %.0f%% interval of the ratio within %s):",
			against, stats.EquivLevel*100, stats.MarginText(models[0].Margin))
	}
	d.Notes = n.List
	for i, m := range models {
		d.Runs = append(d.Runs, docRun(m, ""))
		for _, f := range m.Flags {
			s := f.Message
			if len(models) > 1 {
				s = fmt.Sprintf("run %d: %s", m.Run.ID, s)
			}
			d.Warnings = append(d.Warnings, Warning{i, s})
		}
		if m.Stages != nil {
			d.Stages = append(d.Stages, m.Stages)
		}
	}
	for _, col := range cols {
		d.Bars = append(d.Bars, barChart(models, col))
	}
	for _, g := range cdfGroups(models) {
		d.CDFs = append(d.CDFs, cdfChart(models, g))
	}
	return d
}

func docRun(m *Model, tag string) DocRun {
	r := m.Run
	d := DocRun{Tag: tag, ID: r.ID, Label: runLabel(r), Line: runLine(r), Fingerprint: fingerprintLine(r.Host),
		Kind: r.Kind, State: runState(r), Started: r.Started.UTC().Format("2006-01-02 15:04:05Z"), Host: r.Host,
		Complete: r.Complete, Status: r.Status, IdleWakeup: idleWakeupText(m.IdleWakeup), Conditions: commonConditions(m)}
	d.Arms = armLines(m, d.Conditions == "")
	return d
}

// runName names a run's details on a page of several: its side in a
// comparison ("A") or its id ("run 3"); "" on a page of one run.
func (d *Document) runName(r DocRun) string {
	switch {
	case r.Tag != "":
		return r.Tag
	case len(d.Runs) > 1:
		return fmt.Sprintf("run %d", r.ID)
	}
	return ""
}

// commonConditions is how every arm of the run was measured when that is
// the same for all of them (one calibration, one placement): the page
// says it once instead of on every arm's line.
func commonConditions(m *Model) string {
	common := ""
	for i, a := range m.Run.Arms {
		c := m.ArmConditions[a.Name]
		if c == "" || (i > 0 && c != common) {
			return ""
		}
		common = c
	}
	if len(m.Run.Arms) < 2 {
		return ""
	}
	return common
}

// mainTable lays out the document-shaped table of one run, or of several
// side by side, and returns its value columns.
func (d *Document) mainTable(models []*Model, n *notes) []Column {
	cols := models[0].Columns
	label := []string{"arm"}
	if len(models) > 1 {
		cols = columnsFor(models)
		label = []string{"run", "host", "distro", "kernel", "arm"}
	}
	withPaths := anyPaths(models)
	if withPaths {
		label = append(label, pathHeader)
	}
	d.Main = valueTable(label, cols)
	if len(models) > 1 {
		d.Main.Stated = []bool{false, true, true, true, false, false}
	}
	for _, m := range models {
		h := m.Run.Host
		for _, arm := range m.Arms {
			row := []TableCell{{Text: m.armLabel(arm)}}
			if len(models) > 1 {
				row = []TableCell{{Text: runLabel(m.Run)}, {Text: orUnknown(h.Hostname)}, {Text: orUnknown(h.Distro)},
					{Text: orUnknown(h.Kernel)}, {Text: m.armLabel(arm)}}
			}
			if withPaths {
				row = append(row, m.pathCell(arm, n))
			}
			d.Main.Rows = append(d.Main.Rows, append(row, m.rowCells(arm, cols, n)...))
		}
	}
	return cols
}

// valueTable is a table's header: label columns, then one numeric column
// per Column.
func valueTable(label []string, cols []Column) Table {
	t := Table{Header: append([]string(nil), label...), LabelCols: len(label)}
	t.Right = make([]bool, len(label), len(label)+len(cols))
	for _, c := range cols {
		t.Header = append(t.Header, c.Header)
		t.Right = append(t.Right, true)
		t.Sizes = append(t.Sizes, c.Size)
	}
	return t
}

func (m *Model) rowCells(arm string, cols []Column, n *notes) []TableCell {
	var row []TableCell
	for _, col := range cols {
		c := m.cell(arm, col)
		if c == nil || len(c.Values) == 0 {
			row = append(row, TableCell{Text: "—", Note: n.Add(m.missingNote(arm, col))})
			continue
		}
		if c.Modes != nil {
			// The median and its interval describe neither mode.
			row = append(row, TableCell{Text: modesText(c.Modes, col.Scale), Flags: c.Flags, Note: n.Add(modesNote(c, col))})
			continue
		}
		row = append(row, TableCell{Text: valueText(c, col), Flags: c.Flags})
	}
	return row
}

// verdictSection tests every arm against the baseline, cell by cell; nil
// without a baseline or another arm.
func verdictSection(m *Model) *VerdictSection {
	if m.Baseline == "" || len(m.Arms) < 2 {
		return nil
	}
	v := &VerdictSection{Baseline: m.Baseline, Method: verdictMethod(m.Margin), Table: valueTable([]string{"vs " + m.Baseline}, m.Columns),
		Notes: verdictNotes(m)}
	for _, arm := range m.Arms {
		if arm == m.Baseline {
			continue
		}
		row := []TableCell{{Text: arm}}
		for _, col := range m.Columns {
			c := m.cell(arm, col)
			if c == nil || c.Verdict == nil {
				row = append(row, TableCell{Text: "—"})
				continue
			}
			better, worse := verdictWords(col.metric.Metric)
			row = append(row, TableCell{Text: c.Verdict.Short(better, worse)})
		}
		v.Table.Rows = append(v.Table.Rows, row)
	}
	return v
}

// compareDocument lays out compare's page: both runs, a row per compared
// cell with both medians, the change, the p-value and a verdict of B
// against A.
func compareDocument(rows []ComparisonRow, mA, mB *Model) *Document {
	d := &Document{Title: fmt.Sprintf("cnibench compare: run %s against run %s", runLabel(mB.Run), runLabel(mA.Run)),
		Runs: []DocRun{docRun(mA, "A"), docRun(mB, "B")}, models: []*Model{mA, mB}, compare: rows,
		Answers: compareAnswers(rows),
		AnswerHeading: fmt.Sprintf("The answer, run B against run A for each arm (equivalent: the %.0f%% interval of the ratio within %s):",
			stats.EquivLevel*100, stats.MarginText(mA.Margin))}
	d.Main = Table{Header: []string{"arm", "test", "size", "metric", "A median ±CI", "B median ±CI", "Δ (%)", "p", "verdict (B vs A)"},
		Right: []bool{false, false, true, false, true, true, true, true, false}, LabelCols: 4}
	var n notes
	for _, r := range rows {
		// Raw metric units (no Gb/s scaling per column): both runs'
		// values sit in one column.
		cells := []TableCell{{Text: r.Arm}, {Text: r.Test}, {Text: FormatSize(r.Size)},
			{Text: fmt.Sprintf("%s (%s)", r.Column.metric.Label, displayUnit(r.Column.metric.Unit))},
			cmpValue(r.A, r.Column, &n), cmpValue(r.B, r.Column, &n)}
		if r.Verdict == nil {
			cells = append(cells, TableCell{Text: "—"}, TableCell{Text: "—"}, TableCell{Text: "—", Note: n.Add(r.Missing)})
		} else {
			better, worse := verdictWords(r.Column.metric.Metric)
			cells = append(cells, TableCell{Text: fmt.Sprintf("%+.1f", r.Verdict.DeltaPct)},
				TableCell{Text: stats.FormatP(r.Verdict.Test.P)}, TableCell{Text: r.Verdict.Short(better, worse)})
		}
		d.Main.Rows = append(d.Main.Rows, cells)
	}
	d.Notes = n.List
	d.Legend = []string{"Verdicts, on the repeats of each cell: " + verdictMethod(mA.Margin) + "; Δ = (median B − median A) / median A."}
	for i, m := range d.models {
		for _, f := range m.Flags {
			d.Warnings = append(d.Warnings, Warning{i, d.Runs[i].Tag + ": " + f.Message})
		}
	}
	if fa, fb := mA.Run.Host, mB.Run.Host; fa.Kernel != fb.Kernel || fa.CPUModel != fb.CPUModel || fa.Hostname != fb.Hostname {
		d.Warnings = append(d.Warnings, Warning{-1, "the runs were taken on different hosts or kernels: a difference may be the environment, not the datapath"})
	}
	return d
}

// cmpValue is a compared cell: its median ±CI in the metric's own unit,
// or its two modes with a note.
func cmpValue(c *Cell, col Column, n *notes) TableCell {
	if c == nil || len(c.Values) == 0 {
		return TableCell{Text: "—"}
	}
	if c.Modes != nil {
		col.Scale, col.Unit = 1, displayUnit(col.metric.Unit)
		return TableCell{Text: modesText(c.Modes, 1), Flags: c.Flags, Note: n.Add(modesNote(c, col))}
	}
	return TableCell{Text: medianText(c.Summary, 1), Flags: c.Flags}
}

// barChart is a column of the main table as bars: each arm of each run.
func barChart(models []*Model, col Column) BarChart {
	ch := BarChart{Title: col.Header, Unit: col.Unit}
	for _, m := range models {
		for _, arm := range m.Arms {
			label := chartLabel(models, m, arm)
			c := m.cell(arm, col)
			if c == nil || len(c.Values) == 0 {
				ch.Bars = append(ch.Bars, Bar{Label: label, Missing: "— not measured"})
				continue
			}
			s := c.Summary
			ch.Bars = append(ch.Bars, Bar{Label: label, Median: s.Median * col.Scale,
				Low: s.MedianCI.Low * col.Scale, High: s.MedianCI.High * col.Scale})
		}
	}
	return ch
}

// chartLabel names an arm in a chart; with several runs, its run's id too.
func chartLabel(models []*Model, m *Model, arm string) string {
	if len(models) > 1 {
		return fmt.Sprintf("%d %s", m.Run.ID, arm)
	}
	return arm
}

// cdfGroups are the latency (test, size) groups with at least one CDF.
func cdfGroups(models []*Model) []group {
	set := map[group]bool{}
	for _, m := range models {
		for k, c := range m.cells {
			if len(c.CDF) > 0 && k.Metric == primary(k.Test).Name && k.Metric == mOneWay.Name {
				set[group{k.Test, k.Size}] = true
			}
		}
	}
	var gs []group
	for g := range set {
		gs = append(gs, g)
	}
	sortGroups(gs)
	return gs
}

// cdfChart is one latency group's distributions: each arm of each run.
func cdfChart(models []*Model, g group) CDFChart {
	ch := CDFChart{Name: g.Test + " " + FormatSize(g.Size)}
	k := -1 // arm index across models, as in barChart
	for _, m := range models {
		for _, arm := range m.Arms {
			k++
			label := chartLabel(models, m, arm)
			c := m.cells[cellKey{arm, g.Test, g.Size, mOneWay.Name}]
			if c == nil || len(c.CDF) == 0 {
				ch.Missing = append(ch.Missing, label)
				continue
			}
			// The far tail would squash the body of the curve; p99.9 is
			// the last point drawn.
			var pts []result.CDFPoint
			for _, p := range c.CDF {
				if p.Percentile <= 99.9 {
					pts = append(pts, p)
				}
			}
			ch.Series = append(ch.Series, CDFSeries{label, palette[k%len(palette)], pts})
		}
	}
	return ch
}

// Write prints the document in format.
func (d *Document) Write(w io.Writer, format string) error {
	switch format {
	case FormatTable:
		return writeText(w, d)
	case FormatMarkdown:
		return writeMarkdown(w, d)
	case FormatJSON:
		if d.compare != nil {
			return WriteJSON(w, compareJSON(d))
		}
		return WriteJSON(w, buildJSON(d.models))
	case FormatCSV:
		return writeCSV(w, d.models)
	case FormatHTML:
		return writeHTML(w, d)
	case FormatOpenMetrics:
		return writeOpenMetrics(w, d.models)
	}
	return fmt.Errorf("unknown report format %q; use one of %s", format, strings.Join(Formats, ", "))
}

// warningTexts are the document's warnings in order.
func (d *Document) warningTexts() []string {
	var out []string
	for _, w := range d.Warnings {
		out = append(out, w.Text)
	}
	return out
}
