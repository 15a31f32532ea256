package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/stats"
)

// GateRule is a regression gate for `cnibench compare --fail-on`: a cell
// fails when run B is significantly worse than run A (Mann–Whitney p <
// stats.Alpha) by more than Pct percent. "Worse" follows each metric's
// direction: latency, loss and CPU per transaction up, throughput and
// transaction rate down.
type GateRule struct {
	Pct  float64
	Text string // as written, for messages
}

var gateRE = regexp.MustCompile(`^\s*(worse|slower)\s*>\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$`)

// ParseGate reads a rule such as "slower>5%" or "worse>2.5%" ("slower" is
// a synonym of "worse" for every metric).
func ParseGate(s string) (GateRule, error) {
	m := gateRE.FindStringSubmatch(s)
	if m == nil {
		return GateRule{}, fmt.Errorf("--fail-on %q: want worse>N%% (or slower>N%%), e.g. slower>5%%", s)
	}
	pct, err := strconv.ParseFloat(m[2], 64)
	if err != nil || pct < 0 || pct > 1000 {
		return GateRule{}, fmt.Errorf("--fail-on %q: the threshold must be 0-1000%%", s)
	}
	return GateRule{Pct: pct, Text: strings.TrimSpace(s)}, nil
}

// Fails says whether one compared cell breaks the rule.
func (g GateRule) Fails(r ComparisonRow) bool {
	v := r.Verdict
	return v != nil && v.Direction == stats.Worse && !math.IsNaN(v.DeltaPct) && math.Abs(v.DeltaPct) > g.Pct
}

// Gate returns the rows that break the rule.
func (g GateRule) Gate(rows []ComparisonRow) []ComparisonRow {
	var out []ComparisonRow
	for _, r := range rows {
		if g.Fails(r) {
			out = append(out, r)
		}
	}
	return out
}

// rowName names a compared cell, e.g. "vxlan tcp_lat 1B one-way mean (µs)".
func rowName(r ComparisonRow) string {
	return fmt.Sprintf("%s %s %dB %s", r.Arm, r.Test, r.Size, r.Column.metric.Label)
}

// GateError is returned when a gate fails; the CLI exits 1 with it.
type GateError struct {
	Rule   GateRule
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
	return fmt.Sprintf("gate %s failed: %d cell(s) significantly worse: %s", e.Rule.Text, len(e.Failed), strings.Join(names, "; "))
}

// JUnit writes the comparison as JUnit XML for CI systems: one test case
// per compared cell, failed when it breaks the rule, skipped when one run
// has no value for it.
func (g GateRule) JUnit(w io.Writer, suite string, rows []ComparisonRow) error {
	type failure struct {
		Message string `xml:"message,attr"`
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
		switch {
		case r.Verdict == nil:
			tc.Skipped = &skipped{Message: r.Missing}
			ts.Skipped++
		case g.Fails(r):
			tc.Failure = &failure{Message: fmt.Sprintf("worse by %.1f%% > %g%% (p=%s)", math.Abs(r.Verdict.DeltaPct), g.Pct, stats.FormatP(r.Verdict.Test.P)),
				Text: fmt.Sprintf("median A %.6g, median B %.6g", r.Verdict.MedianA, r.Verdict.MedianB)}
			ts.Failures++
		default:
			tc.SystemOut = fmt.Sprintf("median A %.6g, median B %.6g, change %+.1f%%, %s",
				r.Verdict.MedianA, r.Verdict.MedianB, r.Verdict.DeltaPct, r.Verdict.Direction)
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
