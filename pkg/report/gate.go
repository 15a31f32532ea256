package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
)

// GateGrammar is the --fail-on grammar, quoted in errors and help.
const GateGrammar = "[SELECTOR:]worse>N% (or slower>N%), comma-separated; SELECTOR is a test (tcp_lat), a metric (rtt_p99_us) or test/metric (tcp_crr/client_cpu_us_per_txn)"

// Gate is a regression gate for `cnibench compare --fail-on`: a cell fails
// when run B is significantly worse than run A (Mann–Whitney p <
// stats.Alpha, the test every verdict uses) by more than its rule's
// threshold. "Worse" follows each metric's direction: latency, loss and CPU
// per transaction up, throughput and transaction rate down.
//
// Each cell is held to the most specific rule that selects it
// (test/metric, then metric, then test, then the rule without a
// selector), so "slower>5%,udp_bw:slower>20%" loosens one noisy test
// without loosening the others. A cell no rule selects is not gated.
type Gate struct {
	Rules []GateRule
	Text  string // as written, for messages
}

// GateRule is one comma-separated rule of a Gate.
type GateRule struct {
	Test   string  // "" = any test
	Metric string  // "" = any metric
	Pct    float64 // the cell fails when worse by more than this percentage
	Text   string  // as written
}

// specificity orders rules: a more specific rule overrides a general one.
func (r GateRule) specificity() int {
	s := 0
	if r.Metric != "" {
		s += 2
	}
	if r.Test != "" {
		s++
	}
	return s
}

func (r GateRule) selects(row ComparisonRow) bool {
	return (r.Test == "" || r.Test == row.Test) && (r.Metric == "" || r.Metric == row.Column.metric.Name)
}

var gateRuleRE = regexp.MustCompile(`^(?:([a-z0-9_]+)(?:/([a-z0-9_]+))?\s*:)?\s*(worse|slower)\s*>\s*([0-9]+(?:\.[0-9]+)?)\s*%$`)

// gateMetrics are the metric names a rule may select: every metric a
// comparison can hold.
// (The value is the metric's unit.)
func gateMetrics() map[string]string {
	out := map[string]string{}
	for _, t := range result.Tests {
		for _, m := range allMetrics(t) {
			out[m.Name] = m.Unit
		}
	}
	for _, m := range throughputColumns {
		out[m.Name] = m.Unit
	}
	return out
}

// ParseGate reads --fail-on, e.g. "slower>5%", "worse>2.5%",
// "slower>5%,tcp_lat:slower>3%" or "tcp_crr/client_cpu_us_per_txn:worse>10%".
// "slower" is a synonym of "worse" for every metric.
func ParseGate(s string) (Gate, error) {
	g := Gate{Text: strings.TrimSpace(s)}
	if g.Text == "" {
		return Gate{}, fmt.Errorf("--fail-on is empty: want %s, e.g. slower>5%%", GateGrammar)
	}
	metrics := gateMetrics()
	seen := map[[2]string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		m := gateRuleRE.FindStringSubmatch(part)
		if m == nil {
			return Gate{}, fmt.Errorf("--fail-on rule %q: want %s, e.g. slower>5%%", part, GateGrammar)
		}
		r := GateRule{Text: part}
		switch sel, sub := m[1], m[2]; {
		case sel == "":
		case sub != "":
			if !result.ValidTest(sel) {
				return Gate{}, fmt.Errorf("--fail-on rule %q: unknown test %q (tests: %s)", part, sel, strings.Join(result.Tests, ", "))
			}
			if !isMetric(metrics, sub) {
				return Gate{}, fmt.Errorf("--fail-on rule %q: unknown metric %q (metrics: %s)", part, sub, strings.Join(slices.Sorted(maps.Keys(metrics)), ", "))
			}
			r.Test, r.Metric = sel, sub
		case result.ValidTest(sel):
			r.Test = sel
		case isMetric(metrics, sel):
			r.Metric = sel
		default:
			return Gate{}, fmt.Errorf("--fail-on rule %q: %q is neither a test (%s) nor a metric (%s)", part, sel,
				strings.Join(result.Tests, ", "), strings.Join(slices.Sorted(maps.Keys(metrics)), ", "))
		}
		pct, err := strconv.ParseFloat(m[4], 64)
		if err != nil || pct > 1000 {
			return Gate{}, fmt.Errorf("--fail-on rule %q: the threshold must be 0-1000%%", part)
		}
		r.Pct = pct
		key := [2]string{r.Test, r.Metric}
		if prev, dup := seen[key]; dup {
			return Gate{}, fmt.Errorf("--fail-on: rules %q and %q select the same cells; keep one", prev, part)
		}
		seen[key] = part
		g.Rules = append(g.Rules, r)
	}
	return g, nil
}

// RuleFor returns the most specific rule that selects the row, or nil.
func (g Gate) RuleFor(row ComparisonRow) *GateRule {
	var best *GateRule
	for i := range g.Rules {
		r := &g.Rules[i]
		if r.selects(row) && (best == nil || r.specificity() > best.specificity()) {
			best = r
		}
	}
	return best
}

// WorsePct is how much worse B is than A in percent of A's median, in the
// metric's direction (positive = worse), or NaN without a verdict.
func WorsePct(row ComparisonRow) float64 {
	v := row.Verdict
	if v == nil {
		return math.NaN()
	}
	if row.Column.metric.HigherIsBetter {
		return -v.DeltaPct
	}
	return v.DeltaPct
}

// Fails says whether one compared cell breaks its rule: significantly worse
// (the verdict's direction) and by more than the threshold. The medians'
// change must agree with the rank test's direction.
func (g Gate) Fails(row ComparisonRow) bool {
	r := g.RuleFor(row)
	if r == nil || row.Verdict == nil || row.Verdict.Direction != stats.Worse {
		return false
	}
	w := WorsePct(row)
	return !math.IsNaN(w) && w > r.Pct
}

// Gate returns the rows that break their rule.
func (g Gate) Gate(rows []ComparisonRow) []ComparisonRow {
	var out []ComparisonRow
	for _, r := range rows {
		if g.Fails(r) {
			out = append(out, r)
		}
	}
	return out
}

// Unused returns the rules that select none of the rows: most likely a
// rule written for a test these runs did not measure, which would pass
// silently.
func (g Gate) Unused(rows []ComparisonRow) []GateRule {
	var out []GateRule
	for _, r := range g.Rules {
		used := false
		for _, row := range rows {
			if r.selects(row) {
				used = true
				break
			}
		}
		if !used {
			out = append(out, r)
		}
	}
	return out
}

// rowName names a compared cell, e.g. "vxlan tcp_lat 1B one-way mean (µs)".
func rowName(r ComparisonRow) string {
	return fmt.Sprintf("%s %s %s %s (%s)", r.Arm, r.Test, FormatSize(r.Size), r.Column.metric.Label, displayUnit(r.Column.metric.Unit))
}

// failText describes a failed cell with its numbers.
func (g Gate) failText(r ComparisonRow) string {
	v := r.Verdict
	return fmt.Sprintf("worse by %.1f%% > %g%% (rule %s): median A %.6g, median B %.6g (n=%d+%d), Mann–Whitney p=%s",
		WorsePct(r), g.RuleFor(r).Pct, g.RuleFor(r).Text, v.MedianA, v.MedianB, len(r.A.Values), len(r.B.Values), stats.FormatP(v.Test.P))
}

// GateError is returned when a gate fails; the CLI exits 1 with it.
type GateError struct {
	Gate   Gate
	Failed []ComparisonRow
}

func (e *GateError) Error() string {
	names := make([]string, 0, len(e.Failed))
	for i, r := range e.Failed {
		if i == 4 {
			names = append(names, fmt.Sprintf("and %d more", len(e.Failed)-4))
			break
		}
		names = append(names, fmt.Sprintf("%s %+.1f%% (p=%s)", rowName(r), r.Verdict.DeltaPct, stats.FormatP(r.Verdict.Test.P)))
	}
	return fmt.Sprintf("gate %s failed: %d cell(s) significantly worse: %s", e.Gate.Text, len(e.Failed), strings.Join(names, "; "))
}

// JUnit writes the comparison as JUnit XML for CI systems: one test case
// per compared cell, failed when it breaks its rule (the message gives both
// medians, the change and the p-value), skipped when one run has no value
// for it or no rule selects it.
func (g Gate) JUnit(w io.Writer, suite string, rows []ComparisonRow) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	type skipped struct {
		Message string `xml:"message,attr"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Failure   *failure `xml:"failure,omitempty"`
		Skipped   *skipped `xml:"skipped,omitempty"`
		SystemOut string   `xml:"system-out,omitempty"`
	}
	type testsuite struct {
		XMLName  xml.Name   `xml:"testsuite"`
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Skipped  int        `xml:"skipped,attr"`
		Cases    []testcase `xml:"testcase"`
	}
	ts := testsuite{Name: suite, Tests: len(rows)}
	for _, r := range rows {
		tc := testcase{Name: rowName(r), Classname: "cnibench." + r.Arm}
		rule := g.RuleFor(r)
		switch {
		case r.Verdict == nil:
			tc.Skipped = &skipped{Message: r.Missing}
			ts.Skipped++
		case rule == nil:
			tc.Skipped = &skipped{Message: "no --fail-on rule selects this cell"}
			ts.Skipped++
		case g.Fails(r):
			tc.Failure = &failure{Message: fmt.Sprintf("worse by %.1f%% > %g%% (p=%s)", WorsePct(r), rule.Pct, stats.FormatP(r.Verdict.Test.P)),
				Type: "regression", Text: g.failText(r)}
			ts.Failures++
		default:
			tc.SystemOut = fmt.Sprintf("rule %s: median A %.6g, median B %.6g, change %+.1f%%, %s (p=%s)",
				rule.Text, r.Verdict.MedianA, r.Verdict.MedianB, r.Verdict.DeltaPct, r.Verdict.Direction, stats.FormatP(r.Verdict.Test.P))
		}
		ts.Cases = append(ts.Cases, tc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(ts); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// Passed is the line printed when no cell breaks its rule: how many cells
// were gated, and how many could not be (no value in one run, or no rule).
func (g Gate) Passed(rows []ComparisonRow) string {
	gated, skipped := 0, 0
	for _, r := range rows {
		if r.Verdict != nil && g.RuleFor(r) != nil {
			gated++
		} else {
			skipped++
		}
	}
	s := fmt.Sprintf("gate %s passed: none of %d gated cells significantly worse by more than its threshold", g.Text, gated)
	if skipped > 0 {
		s += fmt.Sprintf(" (%d cells not gated: no value in one run or no rule selects them)", skipped)
	}
	return s
}

func isMetric(metrics map[string]string, name string) bool {
	_, ok := metrics[name]
	return ok
}

// AddMetrics adds the metrics the gate's rules name (e.g.
// "tcp_crr/client_cpu_us_per_txn:worse>5%") to a run's table columns for
// this comparison (nothing is stored), so a rule can gate a metric the
// report does not show by default.
func (g Gate) AddMetrics(r *store.Run) {
	have := extraMetrics(r)
	for _, rule := range g.Rules {
		if rule.Metric != "" && !contains(have, rule.Metric) {
			have = append(have, rule.Metric)
		}
	}
	if len(have) == 0 {
		return
	}
	labels := map[string]string{}
	for k, v := range r.Labels {
		labels[k] = v
	}
	labels[LabelMetrics] = strings.Join(have, ",")
	r.Labels = labels
}
