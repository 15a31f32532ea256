package disrupt

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The HTML page follows the report's rules (pkg/report/html.go): one file,
// inline CSS and hand-written SVG, no scripts, so it opens offline and is
// the same bytes for the same result.

const pageCSS = `body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px}
th{background:#f3f3f3}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.legend{font-size:13px;color:#444}
.answer{border-left:4px solid #4e79a7;padding:0.2em 1em;margin:1em 0;background:#f7f9fc}
.v-better{color:#1a7f37;font-weight:600}
.v-worse{color:#b42318;font-weight:600}
.v-equivalent{color:#175cd3}
.v-undecided{color:#8a4b00}
figure{margin:1em 0}
figcaption{font-size:13px;color:#444}
svg text{font-family:system-ui,sans-serif}`

func esc(s string) string { return html.EscapeString(s) }

// WriteHTML prints the result as one page: the comparisons first, then per
// arm and probe the timeline with its events marked and the events' table.
func WriteHTML(w io.Writer, r *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head><body>\n", esc("cnibench disruption: "+r.Name), pageCSS)
	fmt.Fprintf(&b, "<h1>%s</h1>\n<p>%s</p>\n<p class=\"legend\">started %s; %d arm(s)</p>\n", esc(r.Name), esc(r.Description), r.Started.Format("2006-01-02 15:04:05 UTC"), len(r.Arms))
	if len(r.Comparisons) > 0 {
		fmt.Fprintf(&b, "<section class=\"answer\" id=\"answer\"><p class=\"legend\">against %s: medians over events with their 95%% CI; lower is better</p>\n<table><tr><th>probe</th><th>event</th><th>figure</th><th>%s</th><th>arm</th><th>verdict</th></tr>\n", esc(r.Baseline), esc(r.Baseline))
		for _, c := range r.Comparisons {
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td class=\"num\">%s</td><td class=\"num\">%s: %s</td><td><span class=\"%s\">%s</span>%s</td></tr>\n",
				esc(c.Probe), esc(c.Event), esc(c.Metric), esc(medText(c.MedianA, c.CIA)), esc(c.B), esc(medText(c.MedianB, c.CIB)),
				verdictClass(c.Verdict), esc(c.Verdict), esc(pText(c)))
		}
		b.WriteString("</table></section>\n")
	}
	for _, a := range r.Arms {
		fmt.Fprintf(&b, "<h2>%s</h2>\n<p>%s, probes to %s. ", esc(a.Name), esc(strings.TrimSpace(a.Topology+" "+knobText(a.Knobs))), esc(a.Target))
		if a.ProbeCPUPct != nil {
			fmt.Fprintf(&b, "Probe CPU %.2f %% of one CPU. ", *a.ProbeCPUPct)
		} else {
			fmt.Fprintf(&b, "Probe CPU not measured: %s. ", esc(a.ProbeCPUReason))
		}
		if a.Restored {
			b.WriteString("Rules restored byte for byte.</p>\n")
		} else {
			b.WriteString("<b>Rules not restored.</b></p>\n")
		}
		for _, tl := range a.Timelines {
			fmt.Fprintf(&b, "<figure>%s<figcaption>%s at %.0f requests/s, timeout %.0f ms, %.0f ms buckets: answered per second (blue), lost per second (red: failed, orange: timed out); p50 and p99 latency below. Shaded lines: events (numbered as in the table).</figcaption></figure>\n",
				timelineSVG(a.Name, tl), esc(tl.Probe), tl.RatePerSec, tl.TimeoutMs, tl.BucketMs)
			eventTable(&b, tl)
		}
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func verdictClass(v string) string {
	switch v {
	case "better", "worse", "equivalent", "undecided":
		return "v-" + v
	}
	return "v-equivalent"
}

func eventTable(b *strings.Builder, tl *Timeline) {
	b.WriteString("<table><tr><th>#</th><th>event</th><th>at s</th><th>change ms</th><th>agent CPU ms</th><th>sent</th><th>failed</th><th>timed out</th><th>longest gap ms</th><th>recover ms</th><th>p99 µs</th></tr>\n")
	opt := func(p *float64, f, why string) string {
		if p == nil {
			if why != "" {
				return fmt.Sprintf(`<span title="%s">—</span>`, esc(why))
			}
			return "—"
		}
		return fmt.Sprintf(f, *p)
	}
	for i, e := range tl.Events {
		kind := e.Kind
		if e.Label != "" {
			kind += " (" + e.Label + ")"
		}
		fmt.Fprintf(b, "<tr><td class=\"num\">%d</td><td title=\"%s\">%s</td><td class=\"num\">%.3f</td><td class=\"num\">%.2f</td><td class=\"num\">%s</td><td class=\"num\">%d</td><td class=\"num\">%d</td><td class=\"num\">%d</td><td class=\"num\">%.1f</td><td class=\"num\">%s</td><td class=\"num\">%s</td></tr>\n",
			i+1, esc(e.Detail), esc(kind), e.StartMs/1e3, e.ChangeDurationMs, opt(e.AgentCPUMs, "%.2f", e.AgentCPUReason),
			e.Sent, e.Failed, e.Timeouts, e.LongestGapMs, opt(e.RecoverMs, "%.1f", e.RecoverReason), opt(e.P99Us, "%.0f", "nothing answered"))
	}
	b.WriteString("</table>\n")
}

// timelineSVG draws the timeline: answered and lost requests per second
// per bucket (bars), p50 and p99 per bucket (lines, a logarithmic axis
// when they span more than 20×), and every event as a shaded span from
// its start to the end of its change with its number on top.
func timelineSVG(arm string, tl *Timeline) string {
	const width, left, right, top = 1100.0, 64.0, 20.0, 44.0
	const rateH, gapH, latH, bottom = 150.0, 30.0, 120.0, 36.0
	height := top + rateH + gapH + latH + bottom
	plotW := width - left - right
	dur := tl.DurationMs
	if dur <= 0 {
		dur = 1
	}
	x := func(ms float64) float64 { return left + ms/dur*plotW }
	var b strings.Builder
	title := fmt.Sprintf("%s — %s timeline", arm, tl.Probe)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, "<title>%s</title>\n<text x=\"%.1f\" y=\"16\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", esc(title), left, esc(title))

	// Rate panel.
	rmax := tl.RatePerSec * 1.1
	for _, bk := range tl.Buckets {
		rmax = math.Max(rmax, float64(bk.Sent)/(tl.BucketMs/1e3))
	}
	y0 := top + rateH
	ry := func(v float64) float64 { return y0 - v/rmax*rateH }
	axis(&b, left, top, plotW, rateH)
	for _, v := range niceTicks(0, rmax, 4) {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%g</text>`+"\n",
			left, left+plotW, ry(v), ry(v), left-4, ry(v)+4, v)
	}
	fmt.Fprintf(&b, `<text x="12" y="%.1f" font-size="11" transform="rotate(-90 12 %.1f)" text-anchor="middle">requests/s</text>`+"\n", top+rateH/2, top+rateH/2)
	bw := math.Max(tl.BucketMs/dur*plotW, 0.5)
	per := 1e3 / tl.BucketMs
	for _, bk := range tl.Buckets {
		bx := x(bk.StartMs)
		h := func(v float64) float64 { return v / rmax * rateH }
		ok, fail, tout := float64(bk.OK)*per, float64(bk.Failed)*per, float64(bk.Timeouts)*per
		fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#4e79a7"><title>%.1f s: %d answered, %d failed, %d timed out</title></rect>`+"\n",
			bx, y0-h(ok), bw, h(ok), bk.StartMs/1e3, bk.OK, bk.Failed, bk.Timeouts)
		if fail > 0 {
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#e15759"/>`+"\n", bx, y0-h(ok)-h(fail), bw, h(fail))
		}
		if tout > 0 {
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#f28e2b"/>`+"\n", bx, y0-h(ok)-h(fail)-h(tout), bw, h(tout))
		}
	}

	// Latency panel.
	lt := top + rateH + gapH
	ly0 := lt + latH
	axis(&b, left, lt, plotW, latH)
	lo, hi := math.Inf(1), 0.0
	for _, bk := range tl.Buckets {
		for _, p := range []*float64{bk.P50Us, bk.P99Us} {
			if p != nil && *p > 0 {
				lo, hi = math.Min(lo, *p), math.Max(hi, *p)
			}
		}
	}
	if hi > 0 {
		logScale := hi/lo > 20
		var ly func(float64) float64
		var ticks []float64
		if logScale {
			llo, lhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
			ly = func(v float64) float64 { return ly0 - (math.Log10(v)-llo)/(lhi-llo)*latH }
			for d := llo; d <= lhi; d++ {
				ticks = append(ticks, math.Pow(10, d))
			}
		} else {
			ticks = niceTicks(0, hi*1.1, 4)
			top := ticks[len(ticks)-1]
			ly = func(v float64) float64 { return ly0 - v/top*latH }
		}
		for _, v := range ticks {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%g</text>`+"\n",
				left, left+plotW, ly(v), ly(v), left-4, ly(v)+4, v)
		}
		fmt.Fprintf(&b, `<text x="12" y="%.1f" font-size="11" transform="rotate(-90 12 %.1f)" text-anchor="middle">µs</text>`+"\n", lt+latH/2, lt+latH/2)
		for _, s := range []struct {
			name, color string
			get         func(Bucket) *float64
		}{{"p50", "#59a14f", func(k Bucket) *float64 { return k.P50Us }}, {"p99", "#b07aa1", func(k Bucket) *float64 { return k.P99Us }}} {
			// A bucket with nothing answered breaks the line: no latency
			// is drawn where none was measured.
			var seg []string
			flush := func() {
				if len(seg) > 1 {
					fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", s.color, strings.Join(seg, " "))
				} else if len(seg) == 1 {
					xy := strings.Split(seg[0], ",")
					fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="1.5" fill="%s"/>`+"\n", xy[0], xy[1], s.color)
				}
				seg = seg[:0]
			}
			for _, bk := range tl.Buckets {
				p := s.get(bk)
				if p == nil || *p <= 0 {
					flush()
					continue
				}
				seg = append(seg, fmt.Sprintf("%.2f,%.2f", x(bk.StartMs)+bw/2, ly(*p)))
			}
			flush()
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#59a14f">p50</text><text x="%.1f" y="%.1f" font-size="11" fill="#b07aa1">p99</text>`+"\n",
			left+plotW-60, lt+12, left+plotW-30, lt+12)
	} else {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12">no request answered: no latency</text>`+"\n", left+10, lt+latH/2)
	}

	// Time axis.
	for _, v := range niceTicks(0, dur/1e3, 10) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%g</text>`+"\n", x(v*1e3), ly0+14, v)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">seconds</text>`+"\n", left+plotW/2, ly0+30)

	// Events: a span over both panels from the start to the end of the
	// change (at least 2 px, so an instant change still shows), numbered.
	for i, e := range tl.Events {
		ex := x(e.StartMs)
		ew := math.Max(x(e.EndMs)-ex, 2)
		label := e.Kind
		if e.Label != "" {
			label += " (" + e.Label + ")"
		}
		fmt.Fprintf(&b, `<rect class="event" x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="#333" fill-opacity="0.18" stroke="#333" stroke-width="0.5"><title>%d: %s at %.3f s, change %.1f ms, gap %.1f ms, %d lost</title></rect>`+"\n",
			ex, top, ew, ly0-top, i+1, esc(label), e.StartMs/1e3, e.ChangeDurationMs, e.LongestGapMs, e.Failed+e.Timeouts)
		fmt.Fprintf(&b, `<text x="%.2f" y="%.1f" font-size="10" text-anchor="middle">%d</text>`+"\n", ex, top-4, i+1)
	}
	b.WriteString("</svg>")
	return b.String()
}

func axis(b *strings.Builder, x, y, w, h float64) {
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", x, y, w, h)
}

// niceTicks returns about n round values from lo to at least hi.
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		return []float64{lo}
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for k := 0.0; lo+k*step <= hi+step*0.999; k++ {
		// Rounded to the step's decimals: 0.6, not 0.6000000000000001.
		v, _ := strconv.ParseFloat(strconv.FormatFloat(lo+k*step, 'f', decimals(step), 64), 64)
		out = append(out, v)
	}
	return out
}

// decimals is how many decimals a multiple of step needs.
func decimals(step float64) int {
	for d := 0; d < 9; d++ {
		if s := step * math.Pow(10, float64(d)); math.Abs(s-math.Round(s)) < 1e-9 {
			return d
		}
	}
	return 9
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
