package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/termtable"
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
var Formats = []string{FormatTable, FormatMarkdown, FormatJSON, FormatCSV, FormatHTML, FormatOpenMetrics}

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
	return Options{}.RenderRuns(w, format, in, st)
}

// RenderRuns is RenderRunsStages judged with o.
func (o Options) RenderRuns(w io.Writer, format string, in []Input, st []*stages.Report) error {
	d, err := o.NewDocument(in, st)
	if err != nil {
		return err
	}
	return d.Write(w, format)
}

// notes numbers the footnotes a page's cells point at.
type notes = termtable.Footnotes

// valueText formats a cell's value as "median ±CI ×ratio" (its flags are
// the TableCell's).
func valueText(c *Cell, col Column) string {
	s := medianText(c.Summary, col.Scale)
	if c.Ratio != nil && !math.IsNaN(c.Ratio.Value) {
		s += fmt.Sprintf(" ×%.2f", c.Ratio.Value)
	}
	return s
}

// medianText is "median ±half-width of its CI" (the median alone for one
// value), scaled to the column's unit, in three significant digits.
func medianText(s stats.Summary, scale float64) string {
	med := s.Median * scale
	dec := decimals(med)
	t := formatFixed(med, dec)
	if s.N >= 2 {
		t += " ±" + formatFixed(s.MedianCI.HalfWidth(s.Median)*scale, dec)
	}
	return t
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
	if c := m.cell(arm, col); c != nil {
		return c.Missing
	}
	return "not measured in this run"
}

// verdictNotes explains verdicts that could not be significant whatever
// the numbers, e.g. because there were too few repeats.
func verdictNotes(m *Model) []string {
	seen := map[string]bool{}
	var out []string
	for _, col := range m.Columns {
		for _, arm := range m.Arms {
			c := m.cell(arm, col)
			if c == nil || c.Verdict == nil || c.Verdict.Note == "" || seen[c.Verdict.Note] {
				continue
			}
			seen[c.Verdict.Note] = true
			out = append(out, fmt.Sprintf("Note: %s, so no cell here can be faster or slower; use 5 or more repeats.", c.Verdict.Note))
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
		for _, k := range slices.Sorted(maps.Keys(h.NICDrivers)) {
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

// runLine is the one-line identity of a run.
func runLine(r *store.Run) string {
	s := fmt.Sprintf("Run %d %s · %s · started %s · %s", r.ID, r.Name, orUnknown(r.Kind),
		r.Started.UTC().Format("2006-01-02 15:04:05Z"), runState(r))
	if !r.Finished.IsZero() {
		s += fmt.Sprintf(" · took %s", r.Finished.Sub(r.Started).Round(1e9))
	}
	return s
}

// runState is "complete" or "incomplete", with the run's status line.
func runState(r *store.Run) string {
	state := "complete"
	if !r.Complete {
		state = "incomplete"
	}
	if r.Status != "" {
		state += " (" + r.Status + ")"
	}
	return state
}

// armLines describes each arm's topology, engine and knobs, and how it was
// measured (wake-up policy, CPU placement) when the samples recorded it and
// withConditions is set.
func armLines(m *Model, withConditions bool) []string {
	r := m.Run
	var out []string
	for _, a := range r.Arms {
		s := fmt.Sprintf("%s: topology %s, engine %s", a.Name, orUnknown(a.Topology), orUnknown(a.Engine))
		if len(a.Knobs) > 0 {
			var kv []string
			for _, k := range slices.Sorted(maps.Keys(a.Knobs)) {
				kv = append(kv, k+"="+a.Knobs[k])
			}
			s += ", knobs " + strings.Join(kv, " ")
		}
		if c := m.ArmConditions[a.Name]; c != "" && withConditions {
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
				if c := m.cell(arm, col); c != nil && c.Summary.N >= 2 {
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
	if shownFlag(models, cols, FlagModes) {
		l += " [2 modes]: the samples form two modes, shown as each mode's median (n=its samples), with a note on what separated them."
	}
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

// shownFlag reports whether a cell of the table's columns carries flag:
// the legend explains what the table shows, not what only JSON has.
func shownFlag(models []*Model, cols []Column, flag string) bool {
	for _, m := range models {
		for _, col := range cols {
			for _, arm := range m.Arms {
				if c := m.cell(arm, col); c != nil && contains(c.Flags, flag) {
					return true
				}
			}
		}
	}
	return false
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
