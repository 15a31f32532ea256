package report

import (
	"fmt"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
)

// An Answer is one comparison in one line — what differs, by how much,
// how sure — which every page format prints before its tables: "vxlan vs
// host: tcp_lat slower 35.1% (p=0.0022); tcp_bw equivalent within ±5%;
// udp_bw undecided (≈12 more samples per arm)".
type Answer struct {
	// Subject is what is compared: "vxlan vs host", or in a comparison of
	// runs the arm ("vxlan").
	Subject string
	Parts   []AnswerPart
}

// AnswerPart is one cell of a comparison.
type AnswerPart struct {
	// Cell names the column: "tcp_lat", "tcp_lat 1K", "bitrate (sender)".
	Cell    string
	Outcome stats.Outcome
	// Verdict is the verdict as the answer says it: "slower 35.1%
	// (p=0.0022)", "equivalent within ±5%", "undecided (≈12 more samples
	// per arm)", or "no value: …" when a side has none.
	Verdict string
	// Modes is set when either side's samples form two modes: the
	// percentage compares medians that describe neither mode.
	Modes bool
}

// String is the answer in one line.
func (a Answer) String() string {
	parts := make([]string, len(a.Parts))
	for i, p := range a.Parts {
		parts[i] = p.String()
	}
	return a.Subject + ": " + strings.Join(parts, "; ")
}

// String is "tcp_lat slower 35.1% (p=0.0022)", with "[2 modes]" after it
// when a side has two modes.
func (p AnswerPart) String() string {
	s := p.Cell + " " + p.Verdict
	if p.Modes {
		s += " [" + FlagModes + "]"
	}
	return s
}

// answerPart is one column of a verdict: its name without the unit, and
// the verdict in the answer's words.
func answerPart(col Column, v *stats.Verdict, cells ...*Cell) AnswerPart {
	p := AnswerPart{Cell: strings.TrimSuffix(col.Header, " ("+col.Unit+")")}
	for _, c := range cells {
		p.Modes = p.Modes || (c != nil && c.Modes != nil)
	}
	if v == nil {
		p.Verdict, p.Outcome = "—", stats.Undecided
		return p
	}
	better, worse := verdictWords(col.metric.Metric)
	p.Verdict, p.Outcome = v.Phrase(better, worse), v.Outcome
	return p
}

// reportAnswers are a run's comparisons: each arm against its baseline,
// over the table's columns; none without a baseline.
func reportAnswers(m *Model) []Answer {
	if m.Baseline == "" {
		return nil
	}
	var out []Answer
	for _, arm := range m.Arms {
		if arm == m.Baseline {
			continue
		}
		a := Answer{Subject: arm + " vs " + m.Baseline}
		for _, col := range m.Columns {
			c := m.cell(arm, col)
			if c == nil || c.Verdict == nil {
				continue
			}
			a.Parts = append(a.Parts, answerPart(col, c.Verdict, c, m.cell(m.Baseline, col)))
		}
		if len(a.Parts) > 0 {
			out = append(out, a)
		}
	}
	return out
}

// compareAnswers are a comparison's rows, one answer per arm: B against A.
func compareAnswers(rows []ComparisonRow) []Answer {
	var out []Answer
	at := map[string]int{}
	for _, r := range rows {
		i, ok := at[r.Arm]
		if !ok {
			i = len(out)
			at[r.Arm] = i
			out = append(out, Answer{Subject: r.Arm})
		}
		p := answerPart(r.Column, r.Verdict, r.A, r.B)
		if r.Verdict == nil {
			p.Verdict = "no value: " + r.Missing
		}
		out[i].Parts = append(out[i].Parts, p)
	}
	return out
}

// idleWakeupText is the host's idle wake-up penalty in one line, as the
// report's header shows it: a property of the host, measured once per run.
func idleWakeupText(w *result.IdleWakeup) string {
	if w == nil {
		return ""
	}
	if w.Missing != "" {
		return "idle wake-up penalty: not measured (" + w.Missing + ")"
	}
	rounds := fmt.Sprintf("%d rounds", w.Rounds)
	if w.Rounds == 1 {
		rounds = "1 round"
	}
	return fmt.Sprintf("idle wake-up penalty: %s µs one way (tcp_lat 1B on %s: %s µs with idle CPUs free to halt, %s µs held awake; medians of %s)",
		FormatNumber(w.PenaltyUs), w.Arm, FormatNumber(w.NoneUs), FormatNumber(w.HoldUs), rounds)
}
