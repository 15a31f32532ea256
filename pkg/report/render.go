package report

import (
	"fmt"
	"github.com/cnibench/cnibench/pkg/stages"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
)

// Output formats.
const (
	FormatTable    = "table"
	FormatMarkdown = "markdown"
	FormatJSON     = "json"
	FormatCSV      = "csv"
	FormatHTML     = "html"
)

// Formats lists the output formats, for help texts and errors.
var Formats = []string{FormatTable, FormatMarkdown, FormatJSON, FormatCSV, FormatHTML}

// Input is one stored run with its samples.
type Input struct {
	Run     *store.Run
	Samples []store.Sample
}

// Render writes a report of one run in format.
func Render(w io.Writer, format string, run *store.Run, samples []store.Sample) error {
	return RenderRuns(w, format, []Input{{run, samples}})
}

// RenderRuns writes a report of one or more runs. Several runs are put side
// by side, each row labelled with its run and host fingerprint (the Cilium
// document's per-distro table); ratios stay within each run.
func RenderRuns(w io.Writer, format string, in []Input) error {
	return RenderRunsStages(w, format, in, nil)
}

// RenderRunsStages is RenderRuns with each run's CPU by datapath stage
// (st[i] for in[i]; nil, or a nil entry, for runs taken without --profile).
func RenderRunsStages(w io.Writer, format string, in []Input, st []*stages.Report) error {
	if len(in) == 0 {
		return fmt.Errorf("report: no run given")
	}
	models := make([]*Model, len(in))
	for i, x := range in {
		models[i] = Analyze(x.Run, x.Samples)
		if i < len(st) {
			models[i].Stages = st[i]
		}
	}
	switch format {
	case FormatTable:
		return writeText(w, models)
	case FormatMarkdown:
		return writeMarkdown(w, models)
	case FormatJSON:
		return writeJSON(w, models)
	case FormatCSV:
		return writeCSV(w, models)
	case FormatHTML:
		return writeHTML(w, models)
	}
	return fmt.Errorf("unknown report format %q; use one of %s", format, strings.Join(Formats, ", "))
}

// gcell is one rendered table cell; note > 0 points at a footnote (why the
// value is missing).
type gcell struct {
	Text string
	Note int
}

// grid is a table ready for any renderer.
type grid struct {
	Header []string
	Rows   [][]gcell
	// Right marks right-aligned (numeric) columns; nil means every column
	// from the first with a unit in its header.
	Right []bool
}

func (g grid) right(i int) bool {
	if g.Right != nil {
		return i < len(g.Right) && g.Right[i]
	}
	return i >= firstValueColumn(g)
}

// notes numbers distinct footnote texts.
type notes struct {
	list []string
	idx  map[string]int
}

func (n *notes) add(text string) int {
	if n.idx == nil {
		n.idx = map[string]int{}
	}
	if i, ok := n.idx[text]; ok {
		return i
	}
	n.list = append(n.list, text)
	n.idx[text] = len(n.list)
	return len(n.list)
}

// valueText formats a cell as "median ±CI ×ratio [flags]".
func valueText(c *Cell, col Column) string {
	med := c.Summary.Median * col.Scale
	dec := decimals(med)
	s := formatFixed(med, dec)
	if c.Summary.N >= 2 {
		s += " ±" + formatFixed(c.Summary.MedianCI.HalfWidth(c.Summary.Median)*col.Scale, dec)
	}
	if c.Ratio != nil && !math.IsNaN(c.Ratio.Value) {
		s += fmt.Sprintf(" ×%.2f", c.Ratio.Value)
	}
	if len(c.Flags) > 0 {
		s += " [" + strings.Join(c.Flags, ", ") + "]"
	}
	return s
}

// decimals gives three significant digits, as the source documents print
// (9.71, 15.2, 162).
func decimals(v float64) int {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 2
	}
	d := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	return max(0, min(d, 6))
}

func formatFixed(v float64, dec int) string { return fmt.Sprintf("%.*f", dec, v) }

// FormatNumber prints v with three significant digits.
func FormatNumber(v float64) string { return formatFixed(v, decimals(v)) }

func (m *Model) armLabel(arm string) string {
	if arm == m.Baseline {
		return arm + " (baseline)"
	}
	return arm
}

func (m *Model) missingNote(arm string, col Column) string {
	if c := m.cells[cellKey{arm, col.Test, col.Size, col.metric.Name}]; c != nil {
		return c.Missing
	}
	return "not measured in this run"
}

func (m *Model) rowCells(arm string, cols []Column, n *notes) []gcell {
	var row []gcell
	for _, col := range cols {
		c := m.cells[cellKey{arm, col.Test, col.Size, col.metric.Name}]
		if c == nil || len(c.Values) == 0 {
			row = append(row, gcell{Text: "—", Note: n.add(m.missingNote(arm, col))})
			continue
		}
		row = append(row, gcell{Text: valueText(c, col)})
	}
	return row
}

// mainGrid is the document-shaped table of one run, or of several side by side.
func mainGrid(models []*Model, n *notes) (grid, []Column) {
	if len(models) == 1 {
		m := models[0]
		g := grid{Header: []string{"arm"}}
		for _, c := range m.Columns {
			g.Header = append(g.Header, c.Header)
		}
		for _, arm := range m.Arms {
			g.Rows = append(g.Rows, append([]gcell{{Text: m.armLabel(arm)}}, m.rowCells(arm, m.Columns, n)...))
		}
		return g, m.Columns
	}
	cols := columnsFor(models)
	g := grid{Header: []string{"run", "host", "distro", "kernel", "arm"}}
	for _, c := range cols {
		g.Header = append(g.Header, c.Header)
	}
	for _, m := range models {
		h := m.Run.Host
		for _, arm := range m.Arms {
			row := []gcell{{Text: runLabel(m.Run)}, {Text: orUnknown(h.Hostname)}, {Text: orUnknown(h.Distro)},
				{Text: orUnknown(h.Kernel)}, {Text: m.armLabel(arm)}}
			g.Rows = append(g.Rows, append(row, m.rowCells(arm, cols, n)...))
		}
	}
	return g, cols
}

// verdictGrid tests every arm against the baseline, cell by cell.
func verdictGrid(m *Model) (grid, bool) {
	if m.Baseline == "" || len(m.Arms) < 2 {
		return grid{}, false
	}
	g := grid{Header: []string{"vs " + m.Baseline}}
	for _, c := range m.Columns {
		g.Header = append(g.Header, c.Header)
	}
	for _, arm := range m.Arms {
		if arm == m.Baseline {
			continue
		}
		row := []gcell{{Text: arm}}
		for _, col := range m.Columns {
			c := m.cells[cellKey{arm, col.Test, col.Size, col.metric.Name}]
			if c == nil || c.Verdict == nil {
				row = append(row, gcell{Text: "—"})
				continue
			}
			row = append(row, gcell{Text: shortVerdict(*c.Verdict, col.metric)})
		}
		g.Rows = append(g.Rows, row)
	}
	return g, true
}

// verdictNotes explains verdicts that could not be significant whatever
// the numbers, e.g. because there were too few repeats.
func verdictNotes(m *Model) []string {
	seen := map[string]bool{}
	var out []string
	for _, col := range m.Columns {
		for _, arm := range m.Arms {
			c := m.cells[cellKey{arm, col.Test, col.Size, col.metric.Name}]
			if c == nil || c.Verdict == nil || c.Verdict.Note == "" || seen[c.Verdict.Note] {
				continue
			}
			seen[c.Verdict.Note] = true
			out = append(out, fmt.Sprintf("Note: %s, so n.s. here says nothing either way; use 5 or more repeats.", c.Verdict.Note))
		}
	}
	return out
}

// verdictWords names the directions of a metric for a reader.
func verdictWords(mt result.Metric) (better, worse string) {
	switch mt.Unit {
	case "us", "Mb/s", "kpps", "/s", "GB":
		return "faster", "slower"
	case "%":
		if mt.Name == "udp_loss_pct" {
			return "less loss", "more loss"
		}
		return "less CPU", "more CPU"
	}
	return "better", "worse"
}

func shortVerdict(v stats.Verdict, mt metric) string {
	better, worse := verdictWords(mt.Metric)
	p := stats.FormatP(v.Test.P)
	switch v.Direction {
	case stats.Better:
		return fmt.Sprintf("%s %.1f%% (p=%s)", better, math.Abs(v.DeltaPct), p)
	case stats.Worse:
		return fmt.Sprintf("%s %.1f%% (p=%s)", worse, math.Abs(v.DeltaPct), p)
	}
	return fmt.Sprintf("n.s. (p=%s)", p)
}

func runLabel(r *store.Run) string { return fmt.Sprintf("%d %s", r.ID, r.Name) }

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// fingerprintLine describes a host in one line.
func fingerprintLine(h result.Fingerprint) string {
	cpu := orUnknown(h.CPUModel)
	switch {
	case h.Cores == 1:
		cpu += ", 1 core"
	case h.Cores > 1:
		cpu += fmt.Sprintf(", %d cores", h.Cores)
	}
	parts := []string{
		"host " + orUnknown(h.Hostname),
		orUnknown(h.Distro),
		"kernel " + orUnknown(h.Kernel),
		"CPU " + cpu,
		"governor " + orUnknown(h.Governor),
	}
	if len(h.NICDrivers) > 0 {
		var nics []string
		for _, k := range sortedKeys(h.NICDrivers) {
			nics = append(nics, k+"="+h.NICDrivers[k])
		}
		parts = append(parts, "NICs "+strings.Join(nics, " "))
	}
	if len(h.Capabilities) > 0 {
		parts = append(parts, "probe: "+strings.Join(h.Capabilities, " "))
	}
	parts = append(parts, "cnibench "+orUnknown(h.Cnibench))
	return strings.Join(parts, " · ")
}

func sortedKeys(m map[string]string) []string {
	k := make([]string, 0, len(m))
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}

// runLine is the one-line identity of a run.
func runLine(r *store.Run) string {
	state := "complete"
	if !r.Complete {
		state = "incomplete"
	}
	if r.Status != "" {
		state += " (" + r.Status + ")"
	}
	s := fmt.Sprintf("Run %d %s · %s · started %s · %s", r.ID, r.Name, orUnknown(r.Kind),
		r.Started.UTC().Format("2006-01-02 15:04:05Z"), state)
	if !r.Finished.IsZero() {
		s += fmt.Sprintf(" · took %s", r.Finished.Sub(r.Started).Round(1e9))
	}
	return s
}

// armLines describes each arm's topology, engine and knobs, and how it was
// measured (wake-up policy, CPU placement) when the samples recorded it.
func armLines(m *Model) []string {
	r := m.Run
	var out []string
	for _, a := range r.Arms {
		s := fmt.Sprintf("%s: topology %s, engine %s", a.Name, orUnknown(a.Topology), orUnknown(a.Engine))
		if len(a.Knobs) > 0 {
			var kv []string
			for _, k := range sortedKeys(a.Knobs) {
				kv = append(kv, k+"="+a.Knobs[k])
			}
			s += ", knobs " + strings.Join(kv, " ")
		}
		if c := m.ArmConditions[a.Name]; c != "" {
			s += "; " + c
		}
		if a.Description != "" {
			s += " — " + a.Description
		}
		out = append(out, s)
	}
	return out
}

// legend explains how to read the cells of the given models.
func legend(models []*Model, cols []Column) []string {
	levels := map[int]float64{}
	for _, m := range models {
		for _, col := range cols {
			for _, arm := range m.Arms {
				if c := m.cells[cellKey{arm, col.Test, col.Size, col.metric.Name}]; c != nil && c.Summary.N >= 2 {
					levels[c.Summary.N] = c.Summary.MedianCI.Level
				}
			}
		}
	}
	var ns []int
	for n := range levels {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	var cov []string
	for _, n := range ns {
		cov = append(cov, fmt.Sprintf("n=%d: %.1f%%", n, levels[n]*100))
	}
	l := "Cells: median ±half-width of its 95% confidence interval (binomial order statistics"
	if len(cov) > 0 {
		l += "; achieved coverage " + strings.Join(cov, ", ")
	}
	l += ")"
	var base []string
	for _, m := range models {
		if m.Baseline != "" {
			base = append(base, m.Baseline)
		}
	}
	if len(base) > 0 {
		l += fmt.Sprintf("; ×N = ratio of medians to the run's baseline arm (%s)", strings.Join(uniq(base), ", "))
	}
	l += fmt.Sprintf(". [noisy]: coefficient of variation > %.0f%%; [steal]: steal time > %.0f%%; — : not measured (see notes).", NoisyCV*100, StealPct)
	if anyFlag(models, "disturbed", "wakeup") {
		l += fmt.Sprintf(" [N disturbed]: N samples taken while other processes, steal or a slowed spin loop disturbed the machine; [wakeup]: waking a blocked thread on another CPU costs ≥ %.0f%% of the one-way latency.", WakeupShare*100)
	}
	out := []string{l}
	for _, m := range models {
		if cv, n := m.MedianCV(); n > 0 {
			s := fmt.Sprintf("Median coefficient of variation over %d cells: %.1f%%.", n, cv*100)
			if len(models) > 1 {
				s = fmt.Sprintf("Run %d: median coefficient of variation over %d cells: %.1f%%.", m.Run.ID, n, cv*100)
			}
			out = append(out, s)
		}
	}
	return out
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
