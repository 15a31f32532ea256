package report

import (
	"math"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/stats"
)

// JSONSchema names the JSON report document. Bump it on any change a
// consumer could notice and describe the change in docs/reports.md.
const JSONSchema = "cnibench.report/v1"

// JSONReport is the JSON document: one entry per run.
type JSONReport struct {
	Schema string    `json:"schema"`
	Runs   []JSONRun `json:"runs"`
}

// JSONRun is one run with every analysed cell.
type JSONRun struct {
	ID         int64              `json:"id"`
	Name       string             `json:"name"`
	Kind       string             `json:"kind"`
	Complete   bool               `json:"complete"`
	Status     string             `json:"status"`
	Started    time.Time          `json:"started"`
	Finished   *time.Time         `json:"finished"`
	Baseline   *string            `json:"baseline"` // null: no baseline arm with samples
	Shape      string             `json:"shape"`
	Host       result.Fingerprint `json:"host"`
	Labels     map[string]string  `json:"labels"`
	Arms       []JSONArm          `json:"arms"`
	Experiment string             `json:"experiment"`
	Flags      []Flag             `json:"flags"`
	Cells      []JSONCell         `json:"cells"`
	// Missing lists every cell without a value and why.
	Missing []JSONMissing `json:"missing"`
	// Stages is CPU by datapath stage, for runs taken with --profile.
	Stages *stages.Report `json:"stages,omitempty"`
	// IdleWakeup is the host's idle wake-up penalty, measured once at the
	// start of the run; absent when the run did not measure it.
	IdleWakeup *result.IdleWakeup `json:"idle_wakeup,omitempty"`
}

// JSONArm is one arm's configuration.
type JSONArm struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Topology    string            `json:"topology"`
	Engine      string            `json:"engine"`
	Knobs       map[string]string `json:"knobs"`
	// PathMTU is the arm's path as probed when the run started (the
	// samples' path_mtu); absent when it was not probed.
	PathMTU *result.PathMTU `json:"path_mtu,omitempty"`
}

// JSONCell is the statistics of one arm × test × msg size × metric.
// Numbers that are undefined (e.g. stddev of one value) are null.
type JSONCell struct {
	CellID
	Unit           string    `json:"unit"`
	HigherIsBetter bool      `json:"higher_is_better"`
	N              int       `json:"n"`
	Failed         int       `json:"failed"`
	Median         *float64  `json:"median"`
	MedianCI       JSONCI    `json:"median_ci"`
	Mean           *float64  `json:"mean"`
	MeanCI         JSONCI    `json:"mean_ci"`
	Stddev         *float64  `json:"stddev"`
	CV             *float64  `json:"cv"`
	Min            *float64  `json:"min"`
	Max            *float64  `json:"max"`
	Values         []float64 `json:"values"`
	VsBaseline     *JSONVs   `json:"vs_baseline"` // null for the baseline arm or without one
	Flags          []string  `json:"flags"`
	CDF            []JSONCDF `json:"cdf,omitempty"`
	// Modes is set when the values form two modes (flag "2 modes").
	Modes *JSONModes `json:"modes,omitempty"`
}

// JSONModes is a two-mode cell: each mode, how cleanly they split, and
// which recorded condition of the samples separates them.
type JSONModes struct {
	Low  JSONMode `json:"low"`
	High JSONMode `json:"high"`
	// WithinShare is the share of the variance (of the logarithms) left
	// inside the modes.
	WithinShare float64 `json:"within_share"`
	// SeparatedBy is null when no recorded condition separates them.
	SeparatedBy *JSONModeSeparation `json:"separated_by"`
	Compared    []string            `json:"compared"`
	NotRecorded []string            `json:"not_recorded"`
}

// JSONMode is one mode: its median (the cell's unit) and sample count.
type JSONMode struct {
	Median float64 `json:"median"`
	N      int     `json:"n"`
}

// JSONModeSeparation is the condition that separates two modes, what it
// was in each, the share of samples it puts in their own mode and the
// family-wise p of doing as well by chance.
type JSONModeSeparation struct {
	Condition string  `json:"condition"`
	Low       string  `json:"low"`
	High      string  `json:"high"`
	Accuracy  float64 `json:"accuracy"`
	P         float64 `json:"p"`
}

func jsonModes(m *Modes) *JSONModes {
	if m == nil {
		return nil
	}
	j := &JSONModes{Low: JSONMode(m.Low), High: JSONMode(m.High), WithinShare: m.Within,
		Compared: append([]string{}, m.Tried...), NotRecorded: append([]string{}, m.Unrecorded...)}
	if s := m.Separated; s != nil {
		j.SeparatedBy = &JSONModeSeparation{Condition: s.Condition, Low: s.Low, High: s.High, Accuracy: s.Accuracy, P: s.P}
	}
	return j
}

// JSONCI is a confidence interval; Level is the achieved coverage.
type JSONCI struct {
	Low   *float64 `json:"low"`
	High  *float64 `json:"high"`
	Level float64  `json:"level"`
}

// JSONVs compares a cell with the baseline arm's cell.
type JSONVs struct {
	Ratio   *float64 `json:"ratio"` // median / baseline median
	RatioCI JSONCI   `json:"ratio_ci"`
	JSONVerdict
}

// JSONVerdict is one cell judged against another (an arm against the
// baseline, or run B against run A), the same fields in both documents.
// Where no verdict was made (a compared cell missing in one run) the
// numbers are null and the strings left out; a verdict always has all
// three strings, since both sides have values.
type JSONVerdict struct {
	DeltaPct *float64 `json:"delta_pct"`
	P        *float64 `json:"p"`
	U        *float64 `json:"u"`
	Method   string   `json:"method,omitempty"`
	// Direction is the Mann–Whitney test's answer alone (what the gate
	// reads): better | worse | no significant difference.
	Direction string `json:"direction,omitempty"`
	Verdict   string `json:"verdict,omitempty"`
	// Outcome is the verdict's decision: better | worse | equivalent |
	// undecided.
	Outcome     string           `json:"outcome,omitempty"`
	Equivalence *JSONEquivalence `json:"equivalence,omitempty"`
	// MoreSamples estimates, for an undecided verdict, how many more
	// samples per arm would decide it; absent otherwise or without an
	// estimate.
	MoreSamples *int `json:"more_samples,omitempty"`
}

// JSONEquivalence is the equivalence test of a verdict: B relative to A
// as a ratio (Hodges–Lehmann estimate) with its ~90% interval (level =
// achieved coverage), against ±margin_pct.
type JSONEquivalence struct {
	MarginPct float64  `json:"margin_pct"`
	Ratio     *float64 `json:"ratio"`
	RatioCI   JSONCI   `json:"ratio_ci"`
	Scale     string   `json:"scale"` // log | shift
}

// jsonVerdict is v in the JSON documents, in m's words ("faster",
// "higher"…); nil gives the empty verdict.
func jsonVerdict(v *stats.Verdict, m result.Metric) JSONVerdict {
	if v == nil {
		return JSONVerdict{}
	}
	better, worse := verdictWords(m)
	j := JSONVerdict{DeltaPct: num(v.DeltaPct), P: num(v.Test.P), U: num(v.Test.U),
		Method: v.Test.Method, Direction: v.Direction.String(), Verdict: v.Text(better, worse), Outcome: v.Outcome.String(),
		Equivalence: &JSONEquivalence{MarginPct: v.Margin * 100, Ratio: num(v.Ratio.Estimate), RatioCI: jci(v.Ratio.CI), Scale: v.Ratio.Scale}}
	if v.MoreSamples > 0 {
		n := v.MoreSamples
		j.MoreSamples = &n
	}
	return j
}

// JSONCDF is one point of a latency CDF, in microseconds.
type JSONCDF struct {
	Percentile float64 `json:"percentile"`
	Us         float64 `json:"us"`
}

// JSONMissing says why a cell has no value.
type JSONMissing struct {
	CellID
	Reason string `json:"reason"`
}

// CellID names a cell in the JSON documents (report, compare, history):
// arm × test × message size × metric. Embedded first, its fields keep
// their place in each document.
type CellID struct {
	Arm     string `json:"arm"`
	Test    string `json:"test"`
	MsgSize int    `json:"msg_size_bytes"`
	Metric  string `json:"metric"`
}

func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func jci(c stats.CI) JSONCI { return JSONCI{Low: num(c.Low), High: num(c.High), Level: c.Level} }

// buildJSON returns the JSON document for the given models' runs.
func buildJSON(models []*Model) JSONReport {
	rep := JSONReport{Schema: JSONSchema, Runs: []JSONRun{}}
	for _, m := range models {
		r := m.Run
		jr := JSONRun{ID: r.ID, Name: r.Name, Kind: r.Kind, Complete: r.Complete, Status: r.Status,
			Started: r.Started.UTC(), Shape: m.Shape, Host: r.Host, Labels: nonNilMap(r.Labels),
			Experiment: r.Experiment, Flags: append([]Flag{}, m.Flags...), Cells: []JSONCell{}, Missing: []JSONMissing{}, Stages: m.Stages,
			IdleWakeup: m.IdleWakeup}
		if !r.Finished.IsZero() {
			f := r.Finished.UTC()
			jr.Finished = &f
		}
		if m.Baseline != "" {
			b := m.Baseline
			jr.Baseline = &b
		}
		for _, a := range r.Arms {
			jr.Arms = append(jr.Arms, JSONArm{a.Name, a.Description, a.Topology, a.Engine, nonNilMap(a.Knobs), m.Paths[a.Name]})
		}
		if jr.Arms == nil {
			jr.Arms = []JSONArm{}
		}
		for _, k := range m.Keys {
			c := m.cells[k]
			if len(c.Values) == 0 {
				jr.Missing = append(jr.Missing, JSONMissing{CellID{k.Arm, k.Test, k.Size, k.Metric}, c.Missing})
				continue
			}
			jr.Cells = append(jr.Cells, jsonCell(c))
		}
		rep.Runs = append(rep.Runs, jr)
	}
	return rep
}

// jsonCell is a cell with values in the JSON document.
func jsonCell(c *Cell) JSONCell {
	s := c.Summary
	jc := JSONCell{CellID: CellID{c.Arm, c.Test, c.Size, c.Metric}, Unit: c.Unit,
		HigherIsBetter: c.HigherIsBetter, N: s.N, Failed: c.Failed,
		Median: num(s.Median), MedianCI: jci(s.MedianCI), Mean: num(s.Mean), MeanCI: jci(s.MeanCI),
		Stddev: num(s.Stddev), CV: num(s.CV), Min: num(s.Min), Max: num(s.Max),
		Values: c.Values, Flags: append([]string{}, c.Flags...), Modes: jsonModes(c.Modes)}
	if c.Ratio != nil && c.Verdict != nil {
		jc.VsBaseline = &JSONVs{Ratio: num(c.Ratio.Value), RatioCI: jci(c.Ratio.CI),
			JSONVerdict: jsonVerdict(c.Verdict, result.Metric{Name: c.Metric, Unit: c.Unit})}
	}
	for _, p := range c.CDF {
		jc.CDF = append(jc.CDF, JSONCDF{Percentile: p.Percentile, Us: p.Ns / 1e3})
	}
	return jc
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
