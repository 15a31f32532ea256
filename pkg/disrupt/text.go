package disrupt

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/cnibench/cnibench/pkg/stats"
)

// WriteText prints the result for a terminal: per arm and probe, each
// event kind's medians over its events, then the comparisons.
func WriteText(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "%s — %s\n", r.Name, r.Description)
	for _, a := range r.Arms {
		cpu := "probe CPU not measured: " + a.ProbeCPUReason
		if a.ProbeCPUPct != nil {
			cpu = fmt.Sprintf("probe CPU %.2f %% of one CPU", *a.ProbeCPUPct)
		}
		restored := "rules restored byte for byte"
		if !a.Restored {
			restored = "RULES NOT RESTORED"
		}
		fmt.Fprintf(w, "\n%s (%s → %s): %s; %s\n", a.Name, strings.TrimSpace(a.Topology+" "+knobText(a.Knobs)), a.Target, cpu, restored)
		if m := a.HostConntrackMax; len(m) == 2 && m[0] != nil && m[1] != nil && *m[0] != *m[1] {
			fmt.Fprintf(w, "warning: net.netfilter.nf_conntrack_max changed from %d to %d while probing (another tenant of the host)\n", *m[0], *m[1])
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "probe\tevent\tn\tgap ms\tlost\trecover ms\tagent CPU ms\tchange ms\tp99 µs (before)\t")
		for _, tl := range a.Timelines {
			for _, kind := range eventKinds(tl) {
				med := func(get func(*EventResult) (float64, bool), f string) string {
					xs := values(tl, kind, get)
					if len(xs) == 0 {
						return "—"
					}
					return fmt.Sprintf(f, stats.Median(xs))
				}
				n := len(values(tl, kind, func(*EventResult) (float64, bool) { return 0, true }))
				base := "—"
				if tl.BaselineP99Us != nil {
					base = fmt.Sprintf("%.0f", *tl.BaselineP99Us)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s (%s)\t\n", tl.Probe, kind, n,
					med(compareMetrics[0].get, "%.1f"), med(compareMetrics[1].get, "%.0f"), med(compareMetrics[2].get, "%.1f"),
					med(compareMetrics[4].get, "%.2f"),
					med(func(e *EventResult) (float64, bool) { return e.ChangeDurationMs, true }, "%.2f"),
					med(func(e *EventResult) (float64, bool) {
						if e.P99Us == nil {
							return 0, false
						}
						return *e.P99Us, true
					}, "%.0f"), base)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Comparisons) > 0 {
		fmt.Fprintf(w, "\nagainst %s (medians over events, 95%% CI; lower is better):\n", r.Baseline)
		for _, c := range r.Comparisons {
			fmt.Fprintf(w, "  %s %s %s: %s %s vs %s %s → %s%s\n", c.Probe, c.Event, c.Metric,
				c.A, medText(c.MedianA, c.CIA), c.B, medText(c.MedianB, c.CIB), c.Verdict, pText(c))
		}
	}
	fmt.Fprintln(w, "\nmedians over the events of each kind (a revert counts as its kind); gap: longest run of unanswered requests; lost: failed + timed out")
	return nil
}

func medText(m *float64, ci *stats.CI) string {
	if m == nil {
		return "—"
	}
	return fmt.Sprintf("%.4g [%.4g, %.4g]", *m, ci.Low, ci.High)
}

func pText(c *Comparison) string {
	var parts []string
	if c.P != nil {
		parts = append(parts, "p="+stats.FormatP(*c.P))
	}
	if c.Reason != "" {
		parts = append(parts, c.Reason)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

func knobText(k map[string]string) string {
	if len(k) == 0 {
		return ""
	}
	var parts []string
	for _, key := range sortedKeys(k) {
		parts = append(parts, key+"="+k[key])
	}
	return strings.Join(parts, ",")
}
