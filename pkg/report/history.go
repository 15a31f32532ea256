package report

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/termtable"
)

// A history is every stored run of one experiment, oldest first: each
// cell of the report's table (arm × test × size × metric) as a series of
// per-run medians, with the change points E-divisive means finds in it
// (pkg/stats) and each run's host fingerprint, so a shift that coincides
// with a kernel or host change is seen as such.

// HistorySchema names the JSON document of a history.
const HistorySchema = "cnibench.history/v1"

// HistoryFormats are the formats WriteHistory renders.
var HistoryFormats = []string{FormatTable, FormatJSON, FormatHTML}

// ExperimentOf returns the experiment a stored run belongs to: the name
// its runner stored with it, "" for a run that ran none (a k8s run).
func ExperimentOf(r *store.Run) string { return r.ExperimentName }

// History is the rendered document.
type History struct {
	Schema     string          `json:"schema"`
	Experiment string          `json:"experiment"`
	Runs       []HistoryRun    `json:"runs"`
	Series     []HistorySeries `json:"series"`
	// Detector describes how change points were found.
	Detector string `json:"detector"`
}

// HistoryRun is one stored run of the experiment.
type HistoryRun struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	// Kind is the run's kind: lab (cnibench run), k8s, disrupt, …
	Kind    string             `json:"kind"`
	Started time.Time          `json:"started"`
	Host    result.Fingerprint `json:"host"`
	// Changed lists what of the fingerprint differs from the previous
	// run (hostname, kernel, distro, CPU, cores, cnibench), e.g.
	// "kernel 6.1.0 → 6.18.4"; empty for the first run.
	Changed []string `json:"changed"`
}

// HistorySeries is one table cell across the runs.
type HistorySeries struct {
	CellID
	Header         string `json:"header"` // the report's column header, e.g. "tcp_lat (µs)"
	Unit           string `json:"unit"`
	HigherIsBetter bool   `json:"higher_is_better"`
	// Points has one entry per run, in Runs order; Median is null where
	// the run has no value for the cell.
	Points       []HistoryPoint  `json:"points"`
	ChangePoints []HistoryChange `json:"change_points"`
	// NotTested says why change points were not looked for (too few runs).
	NotTested string `json:"not_tested,omitempty"`
}

// HistoryPoint is one run's median of a cell with its 95% CI.
type HistoryPoint struct {
	Median *float64 `json:"median"`
	Low    *float64 `json:"ci_low"`
	High   *float64 `json:"ci_high"`
	N      int      `json:"n"`
}

// HistoryChange is a change point: from run index Run on (into Runs), the
// cell's level differs from before.
type HistoryChange struct {
	Run   int     `json:"run_index"`
	RunID int64   `json:"run_id"`
	P     float64 `json:"p"`
	// Before and After are the medians of the run medians of the segments
	// on either side; ChangePct is After against Before.
	Before    float64 `json:"before"`
	After     float64 `json:"after"`
	ChangePct float64 `json:"change_pct"`
	Direction string  `json:"direction"` // better | worse
	// HostChanged is what of the fingerprint changed between the last run
	// before and the first run after the change point.
	HostChanged []string `json:"host_changed"`
}

// MinHistoryRuns is the fewest runs change points are looked for in: two
// segments of the detector's minimum size.
const MinHistoryRuns = 6

// BuildHistory analyses the runs of one experiment (in any order; they are
// sorted by start time) into a History. opt tunes the change-point
// detector; the zero value is E-divisive's defaults.
func BuildHistory(experiment string, in []Input, opt stats.EDivisiveOptions) *History {
	sorted := append([]Input(nil), in...)
	for i := 1; i < len(sorted); i++ { // insertion sort: stable, small n
		for j := i; j > 0 && sorted[j].Run.Started.Before(sorted[j-1].Run.Started); j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	h := &History{Schema: HistorySchema, Experiment: experiment, Runs: []HistoryRun{}, Series: []HistorySeries{},
		Detector: fmt.Sprintf("E-divisive means (Matteson & James 2014), α=1, minimum segment %d runs, %d permutations, p ≤ 0.05, fixed seed",
			MinHistoryRuns/2, 199)}
	models := make([]*Model, len(sorted))
	// Each run's analysis and each series' change-point search is
	// independent of the others: spread them over the CPUs (a thousand
	// runs' history took 2.7 s on one).
	parallel(len(sorted), func(i int) { models[i] = Options{cellsOnly: true}.Analyze(sorted[i].Run, sorted[i].Samples) })
	for i, x := range sorted {
		hr := HistoryRun{ID: x.Run.ID, Name: x.Run.Name, Kind: x.Run.Kind, Started: x.Run.Started.UTC(), Host: x.Run.Host, Changed: []string{}}
		if i > 0 {
			hr.Changed = fingerprintDiff(sorted[i-1].Run.Host, x.Run.Host)
		}
		h.Runs = append(h.Runs, hr)
	}
	var arms []string
	for _, m := range models {
		for _, a := range m.Arms {
			if !contains(arms, a) {
				arms = append(arms, a)
			}
		}
	}
	if opt.MinSize == 0 {
		opt.MinSize = MinHistoryRuns / 2
	}
	type pending struct {
		s   HistorySeries
		col Column
		val []float64
		at  []int // run index of each value
		cps []stats.ChangePoint
	}
	var all []*pending
	for _, col := range columnsFor(models) {
		for _, arm := range arms {
			p := &pending{s: HistorySeries{CellID: CellID{arm, col.Test, col.Size, col.metric.Name}, Header: col.Header,
				Unit: col.Unit, HigherIsBetter: col.metric.HigherIsBetter}, col: col}
			for i, m := range models {
				c := m.cell(arm, col)
				if c == nil || len(c.Values) == 0 {
					p.s.Points = append(p.s.Points, HistoryPoint{})
					continue
				}
				sm := c.Summary
				p.s.Points = append(p.s.Points, HistoryPoint{Median: num(sm.Median * col.Scale), Low: num(sm.MedianCI.Low * col.Scale),
					High: num(sm.MedianCI.High * col.Scale), N: sm.N})
				p.val = append(p.val, sm.Median*col.Scale)
				p.at = append(p.at, i)
			}
			if len(p.val) > 0 {
				all = append(all, p)
			}
		}
	}
	parallel(len(all), func(i int) {
		if p := all[i]; len(p.val) >= MinHistoryRuns {
			p.cps = stats.EDivisive(p.val, opt)
		}
	})
	for _, p := range all {
		s, vals, at, cps := p.s, p.val, p.at, p.cps
		s.ChangePoints = []HistoryChange{}
		if len(vals) < MinHistoryRuns {
			s.NotTested = fmt.Sprintf("%d runs with a value; change points need at least %d", len(vals), MinHistoryRuns)
		}
		for k, cp := range cps {
			lo, hi := 0, len(vals)
			if k > 0 {
				lo = cps[k-1].Index
			}
			if k+1 < len(cps) {
				hi = cps[k+1].Index
			}
			before, after := stats.Median(vals[lo:cp.Index]), stats.Median(vals[cp.Index:hi])
			hc := HistoryChange{Run: at[cp.Index], RunID: h.Runs[at[cp.Index]].ID, P: cp.P, Before: before, After: after,
				ChangePct: (after - before) / math.Abs(before) * 100, Direction: "worse",
				HostChanged: fingerprintDiff(h.Runs[at[cp.Index-1]].Host, h.Runs[at[cp.Index]].Host)}
			if (after > before) == p.col.metric.HigherIsBetter {
				hc.Direction = "better"
			}
			s.ChangePoints = append(s.ChangePoints, hc)
		}
		h.Series = append(h.Series, s)
	}
	return h
}

// fingerprintDiff lists what differs between two host fingerprints.
func fingerprintDiff(a, b result.Fingerprint) []string {
	out := []string{}
	for _, f := range []struct{ name, a, b string }{
		{"host", a.Hostname, b.Hostname}, {"kernel", a.Kernel, b.Kernel}, {"distro", a.Distro, b.Distro},
		{"CPU", a.CPUModel, b.CPUModel}, {"cores", fmt.Sprint(a.Cores), fmt.Sprint(b.Cores)},
		{"governor", a.Governor, b.Governor}, {"cnibench", a.Cnibench, b.Cnibench},
	} {
		if f.a != f.b {
			out = append(out, fmt.Sprintf("%s %s → %s", f.name, orUnknown(f.a), orUnknown(f.b)))
		}
	}
	return out
}

// WriteHistory renders a history as a terminal table (with a sparkline per
// cell), JSON (HistorySchema) or a self-contained HTML page (a line chart
// per cell).
func WriteHistory(w io.Writer, format string, h *History) error {
	switch format {
	case FormatTable:
		return writeHistoryText(w, h)
	case FormatJSON:
		return WriteJSON(w, h)
	case FormatHTML:
		return writeHistoryHTML(w, h)
	}
	return fmt.Errorf("unknown history format %q; use one of %s", format, strings.Join(HistoryFormats, ", "))
}

var sparks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws values (NaN = no value, drawn as a space) scaled from
// their minimum to their maximum, with "│" before each index in cuts.
func Sparkline(vals []float64, cuts []int) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if !math.IsNaN(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	cut := map[int]bool{}
	for _, c := range cuts {
		cut[c] = true
	}
	var b strings.Builder
	for i, v := range vals {
		if cut[i] {
			b.WriteRune('│')
		}
		switch {
		case math.IsNaN(v):
			b.WriteRune(' ')
		case hi == lo:
			b.WriteRune(sparks[len(sparks)/2])
		default:
			k := int(math.Round((v - lo) / (hi - lo) * float64(len(sparks)-1)))
			b.WriteRune(sparks[k])
		}
	}
	return b.String()
}

func (s HistorySeries) values() []float64 {
	out := make([]float64, len(s.Points))
	for i, p := range s.Points {
		out[i] = math.NaN()
		if p.Median != nil {
			out[i] = *p.Median
		}
	}
	return out
}

func (s HistorySeries) name() string {
	return fmt.Sprintf("%s %s", s.Arm, s.Header)
}

func (h *History) changeText(c HistoryChange, s HistorySeries) string {
	better, worse := verdictWords(result.Metric{Name: s.Metric, Unit: gateMetrics()[s.Metric], HigherIsBetter: s.HigherIsBetter})
	word := worse
	if c.Direction == "better" {
		word = better
	}
	t := fmt.Sprintf("from run %d: %s → %s (%s by %.1f%%, p=%s)", c.RunID, FormatNumber(c.Before), FormatNumber(c.After),
		word, math.Abs(c.ChangePct), stats.FormatP(c.P))
	if len(c.HostChanged) > 0 {
		t += "; with it " + strings.Join(c.HostChanged, ", ")
	}
	return t
}

// changesText is every change point of a series, "; "-separated.
func (h *History) changesText(s HistorySeries) string {
	var parts []string
	for _, c := range s.ChangePoints {
		parts = append(parts, h.changeText(c, s))
	}
	return strings.Join(parts, "; ")
}

// hostGrid lists the runs grouped by fingerprint: runs with the same host,
// kernel, distro, CPU and cnibench are one row, and a new row starts where
// one of them changed.
func (h *History) hostGrid() Table {
	g := Table{Header: []string{"runs", "ids", "host", "distro", "kernel", "CPU", "cnibench", "changed from the previous runs"}}
	for i := 0; i < len(h.Runs); {
		j := i + 1
		for j < len(h.Runs) && len(h.Runs[j].Changed) == 0 {
			j++
		}
		r, last := h.Runs[i], h.Runs[j-1]
		span, ids := fmt.Sprint(i+1), fmt.Sprint(r.ID)
		if j-1 > i {
			span, ids = fmt.Sprintf("%d–%d", i+1, j), fmt.Sprintf("%d … %d", r.ID, last.ID)
		}
		g.Rows = append(g.Rows, []TableCell{{Text: span}, {Text: ids}, {Text: orUnknown(r.Host.Hostname)}, {Text: orUnknown(r.Host.Distro)},
			{Text: orUnknown(r.Host.Kernel)}, {Text: orUnknown(r.Host.CPUModel)}, {Text: orUnknown(r.Host.Cnibench)}, {Text: strings.Join(r.Changed, ", ")}})
		i = j
	}
	return g
}

func writeHistoryText(w io.Writer, h *History) error {
	var b strings.Builder
	fmt.Fprintf(&b, "History of experiment %s: %d stored runs%s", h.Experiment, len(h.Runs), h.kindsText())
	if n := len(h.Runs); n > 0 {
		fmt.Fprintf(&b, ", %s … %s", h.Runs[0].Started.Format("2006-01-02 15:04Z"), h.Runs[n-1].Started.Format("2006-01-02 15:04Z"))
	}
	b.WriteString("\n\n")
	textTables(&b, h.hostGrid())
	b.WriteString("\n")
	g := Table{Header: []string{"arm", "cell", "runs (oldest → newest)", "first", "last", "change points"},
		Right: []bool{false, false, false, true, true, false}, LabelCols: 2}
	for _, s := range h.Series {
		vals := s.values()
		var cuts []int
		for _, c := range s.ChangePoints {
			cuts = append(cuts, c.Run)
		}
		first, last := "—", "—"
		for _, v := range vals {
			if !math.IsNaN(v) {
				if first == "—" {
					first = FormatNumber(v)
				}
				last = FormatNumber(v)
			}
		}
		cp := "none"
		switch {
		case s.NotTested != "":
			cp = "not tested: " + s.NotTested
		case len(s.ChangePoints) > 0:
			cp = h.changesText(s)
		}
		g.Rows = append(g.Rows, []TableCell{{Text: s.Arm}, {Text: s.Header}, {Text: Sparkline(vals, cuts), Whole: true}, {Text: first}, {Text: last}, {Text: cp}})
	}
	textTables(&b, g)
	fmt.Fprintln(&b, termtable.Wrap(fmt.Sprintf("Each run's median of the cell; │ marks a change point. %s.", h.Detector), TextWidth, ""))
	_, err := io.WriteString(w, b.String())
	return err
}

// kindsText names the runs' kinds, " (disrupt)" or " (lab 3, disrupt 2)";
// "" when every run is a lab run (cnibench run), the history most have.
func (h *History) kindsText() string {
	var kinds []string
	n := map[string]int{}
	for _, r := range h.Runs {
		if n[r.Kind] == 0 {
			kinds = append(kinds, r.Kind)
		}
		n[r.Kind]++
	}
	switch {
	case len(kinds) == 0 || (len(kinds) == 1 && kinds[0] == store.KindLab):
		return ""
	case len(kinds) == 1:
		return " (" + kinds[0] + ")"
	}
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func writeHistoryHTML(w io.Writer, h *History) error {
	var b strings.Builder
	title := "cnibench history: " + h.Experiment
	htmlHead(&b, title)
	b.WriteString("<h2>Cells across runs</h2>\n")
	fmt.Fprintf(&b, "<p class=\"legend\">Each run's median with its 95%% confidence interval; red dashed lines: change points (%s); grey dotted lines: the host fingerprint changed.</p>\n", esc(h.Detector))
	for _, s := range h.Series {
		b.WriteString("<figure>\n")
		b.WriteString(historyChart(h, s))
		cp := "no change point"
		switch {
		case s.NotTested != "":
			cp = "change points not tested: " + s.NotTested
		case len(s.ChangePoints) > 0:
			cp = "change points: " + h.changesText(s)
		}
		fmt.Fprintf(&b, "<figcaption>%s: %s.</figcaption>\n</figure>\n", esc(s.name()), esc(cp))
	}
	if n := len(h.Runs); n > 0 {
		fmt.Fprintf(&b, "<h2>Runs and hosts</h2>\n<p class=\"legend\">%d runs%s, %s … %s; a new row starts where the host fingerprint changed.</p>\n",
			n, esc(h.kindsText()), esc(h.Runs[0].Started.Format("2006-01-02 15:04Z")), esc(h.Runs[n-1].Started.Format("2006-01-02 15:04Z")))
	}
	htmlTable(&b, h.hostGrid())
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// historyChart is a line chart of one series: x the runs in order, y the
// medians with CI whiskers, change points and fingerprint changes as
// vertical lines between runs.
func historyChart(h *History, s HistorySeries) string {
	const width, height, left, right, top, bottom = 640.0, 300.0, 64.0, 20.0, 30.0, 44.0
	plotW, plotH := width-left-right, height-top-bottom
	var ymax float64
	for _, p := range s.Points {
		if p.High != nil {
			ymax = math.Max(ymax, *p.High)
		}
		if p.Median != nil {
			ymax = math.Max(ymax, *p.Median)
		}
	}
	ticks, end := niceTicks(ymax)
	dec := tickDecimals(ticks)
	n := len(s.Points)
	x := func(i float64) float64 {
		if n == 1 {
			return left + plotW/2
		}
		return left + i/float64(n-1)*plotW
	}
	y := func(v float64) float64 { return top + plotH - v/end*plotH }
	title := s.name()
	var b strings.Builder
	svgOpen(&b, width, height, left, title)
	for _, t := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, y(t), left+plotW, y(t))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%s</text>`+"\n", left-4, y(t)+4, formatFixed(t, dec))
	}
	fmt.Fprintf(&b, `<text x="14" y="%.1f" font-size="11" text-anchor="middle" transform="rotate(-90 14 %.1f)">%s</text>`+"\n", top+plotH/2, top+plotH/2, esc(s.Unit))
	step := 1 + n/12 // at most about a dozen run labels
	for i, r := range h.Runs {
		if i%step == 0 || i == n-1 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%d</text>`+"\n", x(float64(i)), top+plotH+14, r.ID)
		}
		if i > 0 && len(r.Changed) > 0 {
			xc := x(float64(i) - 0.5)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="2 3"><title>%s</title></line>`+"\n",
				xc, top, xc, top+plotH, esc(strings.Join(r.Changed, ", ")))
		}
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">run id (oldest → newest)</text>`+"\n", left+plotW/2, top+plotH+30)
	for _, c := range s.ChangePoints {
		xc := x(float64(c.Run) - 0.5)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e15759" stroke-width="1.5" stroke-dasharray="6 4"><title>%s</title></line>`+"\n",
			xc, top, xc, top+plotH, esc(h.changeText(c, s)))
	}
	var pts []string
	flush := func() {
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), palette[0])
		}
		pts = nil
	}
	for i, p := range s.Points {
		if p.Median == nil {
			flush() // a gap where the run has no value
			continue
		}
		xi := x(float64(i))
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", xi, y(*p.Median)))
		if p.Low != nil && p.High != nil && p.N >= 2 {
			fmt.Fprintf(&b, `<path d="M%.1f %.1fV%.1f" stroke="#999" stroke-width="1"/>`+"\n", xi, y(*p.Low), y(*p.High))
		}
	}
	flush()
	for i, p := range s.Points {
		if p.Median != nil {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>run %d: %s %s (n=%d)</title></circle>`+"\n",
				x(float64(i)), y(*p.Median), palette[0], h.Runs[i].ID, esc(FormatNumber(*p.Median)), esc(s.Unit), p.N)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// parallel runs f(0) … f(n-1) on as many goroutines as there are CPUs to
// run them, and waits.
func parallel(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(n, runtime.GOMAXPROCS(0)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		}()
	}
	wg.Wait()
}
