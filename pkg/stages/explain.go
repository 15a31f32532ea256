package stages

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/cnibench/cnibench/pkg/stats"
)

// Part is one stage's difference between two arms.
type Part struct {
	Stage   Stage   `json:"stage"`
	A       float64 `json:"a"`     // median over A's repeats
	B       float64 `json:"b"`     // median over B's repeats
	Delta   float64 `json:"delta"` // B - A
	P       float64 `json:"p"`     // two-sided Mann–Whitney over the repeats
	Sure    bool    `json:"significant"`
	Repeats [2]int  `json:"repeats"`
}

// Explanation is how arm B's CPU per unit of work differs from arm A's in
// one test and size, stage by stage.
type Explanation struct {
	A, B    string `json:"-"`
	Test    string `json:"test"`
	MsgSize int    `json:"msg_size_bytes"`
	Unit    string `json:"unit"`
	Total   Part   `json:"total"`
	Parts   []Part `json:"stages"` // largest |delta| first
	// UserCode splits the user-space time of the userspace datapath's
	// processes (ovs-vswitchd) by function, in each arm, where the
	// profile resolved them (or says why it could not).
	UserCode []UserCode `json:"user_code,omitempty"`
	Note     string     `json:"note,omitempty"`
	Missing  string     `json:"missing,omitempty"`
}

func part(s Stage, a, b []float64) Part {
	p := Part{Stage: s, A: stats.Median(a), B: stats.Median(b), Repeats: [2]int{len(a), len(b)}, P: math.NaN()}
	p.Delta = p.B - p.A
	if len(a) >= 2 && len(b) >= 2 {
		p.P = stats.MannWhitney(a, b).P
		p.Sure = p.P < stats.Alpha
	}
	return p
}

// Explain compares arm b against arm a in every test and size both have a
// profile of.
func Explain(cells []*Cell, a, b string) ([]Explanation, error) {
	find := func(arm, test string, size int) *Cell {
		for _, c := range cells {
			if c.Arm == arm && c.Test == test && c.MsgSize == size {
				return c
			}
		}
		return nil
	}
	var out []Explanation
	var armsSeen = map[string]bool{}
	for _, c := range cells {
		armsSeen[c.Arm] = true
	}
	for _, arm := range []string{a, b} {
		if !armsSeen[arm] {
			var names []string
			for n := range armsSeen {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, notProfiled(fmt.Sprintf("arm %q has no profile in this run (profiled arms: %s)", arm, strings.Join(names, ", ")))
		}
	}
	for _, ca := range cells {
		if ca.Arm != a {
			continue
		}
		cb := find(b, ca.Test, ca.MsgSize)
		if cb == nil {
			continue
		}
		e := Explanation{A: a, B: b, Test: ca.Test, MsgSize: ca.MsgSize, Unit: ca.Unit}
		ta, tb := ca.totals(), cb.totals()
		if len(ta) == 0 || len(tb) == 0 {
			e.Missing = "no repeat of one arm could be costed: " + firstMissing(ca, cb)
			out = append(out, e)
			continue
		}
		e.Total = part("total", ta, tb)
		for _, s := range busyStages(ca, cb) {
			if p := part(s, ca.costs(s), cb.costs(s)); p.A != 0 || p.B != 0 {
				e.Parts = append(e.Parts, p)
			}
		}
		sort.SliceStable(e.Parts, func(i, j int) bool { return math.Abs(e.Parts[i].Delta) > math.Abs(e.Parts[j].Delta) })
		e.UserCode = userCode(ca, cb)
		if len(ta) < 2 || len(tb) < 2 {
			e.Note = "one repeat per arm: no significance (run with --repeats 5 or more)"
		} else if stats.MinP(len(ta), len(tb)) >= stats.Alpha {
			e.Note = fmt.Sprintf("%d and %d repeats cannot reach p < %.2f; use more repeats", len(ta), len(tb), stats.Alpha)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("arms %q and %q have no test and size profiled in common", a, b)
	}
	return out, nil
}

func firstMissing(cs ...*Cell) string {
	for _, c := range cs {
		for _, r := range c.Repeats {
			if r.Missing != "" {
				return r.Missing
			}
		}
	}
	return "no reason recorded"
}

func unitText(u string) (string, string) {
	if u == PerGB {
		return "CPU-s per GB", "s/GB"
	}
	return "CPU-µs per transaction", "µs"
}

func sure(p Part) string {
	switch {
	case math.IsNaN(p.P):
		return "n/a"
	case p.Sure:
		return fmt.Sprintf("p=%s, significant", stats.FormatP(p.P))
	}
	return fmt.Sprintf("p=%s, not significant", stats.FormatP(p.P))
}

// WriteText writes explanations as sentences and a table per cell.
func WriteText(w io.Writer, es []Explanation) error {
	for i, e := range es {
		if i > 0 {
			fmt.Fprintln(w)
		}
		long, short := unitText(e.Unit)
		if e.Missing != "" {
			fmt.Fprintf(w, "%s %s %dB: %s\n", e.B, e.Test, e.MsgSize, e.Missing)
			continue
		}
		more := "more"
		if e.Total.Delta < 0 {
			more = "less"
		}
		var top []string
		for _, p := range e.Parts {
			if len(top) == 4 || math.Abs(p.Delta) < 0.05*math.Abs(e.Total.Delta) {
				break
			}
			top = append(top, fmt.Sprintf("%s %+.3g", p.Stage, p.Delta))
		}
		fmt.Fprintf(w, "%s %d B: %s costs %.3g %s %s than %s (%.3g vs %.3g; %s): %s\n",
			e.Test, e.MsgSize, e.B, math.Abs(e.Total.Delta), long, more, e.A, e.Total.B, e.Total.A, sure(e.Total), strings.Join(top, ", "))
		if e.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", e.Note)
		}
		fmt.Fprintf(w, "  %-16s %10s %10s %10s  %s\n", "stage", e.A+" "+short, e.B+" "+short, "delta", "how sure (repeats)")
		for _, p := range e.Parts {
			fmt.Fprintf(w, "  %-16s %10.3g %10.3g %+10.3g  %s (%d/%d)\n", p.Stage, p.A, p.B, p.Delta, sure(p), p.Repeats[0], p.Repeats[1])
		}
		for _, u := range e.UserCode {
			for _, arm := range []struct {
				name string
				fs   []UserFunction
			}{{e.A, u.A}, {e.B, u.B}} {
				fmt.Fprintf(w, "  %s%s in %s, by function: %s\n", UserPrefix, u.Process, arm.name, userFunctionsText(arm.fs))
			}
		}
	}
	return nil
}

// CompareRuns explains, for every arm profiled in both runs, how run b's
// CPU per unit of work differs from run a's, stage by stage: what `compare`
// prints under its table when both runs were taken with --profile. The
// explanations' A and B are "<run a>/<arm>" and "<run b>/<arm>".
func CompareRuns(a, b []*Cell, nameA, nameB string) []Explanation {
	var cells []*Cell
	inB := map[string]bool{}
	for _, c := range b {
		inB[c.Arm] = true
	}
	var arms []string
	seen := map[string]bool{}
	for _, c := range a {
		if inB[c.Arm] && !seen[c.Arm] {
			seen[c.Arm] = true
			arms = append(arms, c.Arm)
		}
	}
	rename := func(cs []*Cell, run string) {
		for _, c := range cs {
			cc := *c
			cc.Arm = run + "/" + c.Arm
			cells = append(cells, &cc)
		}
	}
	rename(a, nameA)
	rename(b, nameB)
	var out []Explanation
	for _, arm := range arms {
		es, err := Explain(cells, nameA+"/"+arm, nameB+"/"+arm)
		if err != nil {
			continue // no test and size profiled in common for this arm
		}
		out = append(out, es...)
	}
	return out
}
