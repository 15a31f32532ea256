package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/stats"
)

// The HTML report is one file with inline CSS and inline SVG: no scripts,
// fonts or stylesheets to fetch, so it opens offline and can be mailed or
// attached to a ticket as is. The charts are written by hand rather than by
// a chart library: they are two simple shapes (bars with whiskers, CDF
// lines), and hand-written SVG is byte-for-byte deterministic, which the
// golden-file tests rely on.

const css = `body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px}
th{background:#f3f3f3}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.fp{color:#555;font-size:14px}
.warn{color:#8a4b00}
.legend{font-size:13px;color:#444}
.answer{border-left:4px solid #4e79a7;padding:0.2em 1em;margin:1em 0;background:#f7f9fc}
.answer ul{margin:0.3em 0;padding-left:1.2em}
.answer li{margin:0.2em 0}
.v-better{color:#1a7f37;font-weight:600}
.v-worse{color:#b42318;font-weight:600}
.v-equivalent{color:#175cd3}
.v-undecided{color:#8a4b00}
figure{display:inline-block;margin:1em 1em 1em 0;vertical-align:top}
figcaption{font-size:13px;color:#444}
svg text{font-family:system-ui,sans-serif}`

var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

func esc(s string) string { return html.EscapeString(s) }

// writeHTML prints the document as one self-contained page that leads
// with the answer: one line per comparison, then the host (with its idle
// wake-up penalty) and how every arm was measured, then the results and
// verdict tables; the runs' details, warnings, notes and charts follow.
func writeHTML(w io.Writer, d *Document) error {
	var b strings.Builder
	htmlHead(&b, d.Title)
	if len(d.Answers) > 0 {
		fmt.Fprintf(&b, "<section class=\"answer\" id=\"answer\">\n<p class=\"legend\">%s</p>\n<ul>\n", esc(d.AnswerHeading))
		for _, a := range d.Answers {
			fmt.Fprintf(&b, "<li><b>%s</b>: ", esc(a.Subject))
			for k, p := range a.Parts {
				if k > 0 {
					b.WriteString("; ")
				}
				fmt.Fprintf(&b, "%s <span class=\"%s\">%s</span>", esc(p.Cell), outcomeClass(p.Outcome), esc(p.Verdict))
				if p.Modes {
					fmt.Fprintf(&b, " [%s]", FlagModes)
				}
			}
			b.WriteString("</li>\n")
		}
		b.WriteString("</ul>\n</section>\n")
	}
	for _, r := range d.Runs {
		who := ""
		if name := d.runName(r); name != "" {
			who = name + ": "
		}
		fmt.Fprintf(&b, "<p class=\"fp\">%s%s", esc(who), esc(r.Fingerprint))
		for _, l := range []string{r.IdleWakeup, conditionsLine(r.Conditions)} {
			if l != "" {
				fmt.Fprintf(&b, "<br>%s", esc(l))
			}
		}
		b.WriteString("</p>\n")
	}

	b.WriteString("<h2 id=\"results\">Results</h2>\n")
	htmlTable(&b, d.Main)
	htmlLegend(&b, d.Legend)
	if v := d.Verdicts; v != nil {
		fmt.Fprintf(&b, "<h3>Each arm against %s</h3>\n<p class=\"legend\">%s.</p>\n", esc(v.Baseline), esc(v.Method))
		htmlTable(&b, v.Table)
		htmlLegend(&b, v.Notes)
	}
	if len(d.Notes) > 0 {
		b.WriteString("<h3>Notes</h3>\n<ol class=\"legend\">\n")
		for i, t := range d.Notes {
			fmt.Fprintf(&b, "<li id=\"note-%d\">%s</li>\n", i+1, esc(t))
		}
		b.WriteString("</ol>\n")
	}
	if len(d.Warnings) > 0 {
		b.WriteString("<h2>Warnings</h2>\n")
		for i := range d.Runs {
			htmlWarnings(&b, d.Warnings, i)
		}
		htmlWarnings(&b, d.Warnings, -1)
	}

	// The details: each run's state, host and arms. A run's status line
	// can be a paragraph, so it sits under the table, not in a cell.
	b.WriteString("<h2>Runs and hosts</h2>\n<table>\n<tr><th>run</th><th>kind</th><th>state</th><th>started</th><th>host</th><th>distro</th><th>kernel</th><th>CPU</th><th>cores</th><th>governor</th><th>cnibench</th></tr>\n")
	for _, r := range d.Runs {
		h := r.Host
		cores := "unknown"
		if h.Cores > 0 {
			cores = fmt.Sprint(h.Cores)
		}
		state := "complete"
		if !r.Complete {
			state = "incomplete"
		}
		b.WriteString("<tr>")
		for _, c := range []string{r.Label, r.Kind, state, r.Started, orUnknown(h.Hostname), orUnknown(h.Distro), orUnknown(h.Kernel),
			orUnknown(h.CPUModel), cores, orUnknown(h.Governor), orUnknown(h.Cnibench)} {
			fmt.Fprintf(&b, "<td>%s</td>", esc(c))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
	for _, r := range d.Runs {
		if r.Status != "" {
			fmt.Fprintf(&b, "<p class=\"legend\">Run %s: %s</p>\n", esc(r.Label), esc(r.Status))
		}
		if len(r.Arms) > 0 {
			if len(d.Runs) > 1 {
				fmt.Fprintf(&b, "<p>Arms of run %d:</p>\n", r.ID)
			}
			b.WriteString("<ul>\n")
			for _, l := range r.Arms {
				fmt.Fprintf(&b, "<li>%s</li>\n", esc(l))
			}
			b.WriteString("</ul>\n")
		}
	}

	b.WriteString("<h2>Charts</h2>\n")
	for _, c := range d.Bars {
		b.WriteString("<figure>\n")
		b.WriteString(barSVG(c))
		fmt.Fprintf(&b, "<figcaption>%s: median with its 95%% confidence interval per arm.</figcaption>\n</figure>\n", esc(c.Title))
	}
	for _, c := range d.CDFs {
		b.WriteString("<figure>\n")
		b.WriteString(cdfSVG(c))
		fmt.Fprintf(&b, "<figcaption>%s: round-trip latency CDF of the repeat closest to each arm's median.</figcaption>\n</figure>\n", esc(c.Name))
	}
	for _, st := range d.Stages {
		b.WriteString(st.HTML())
	}
	if sc := d.StagesCompared; sc != nil {
		var t strings.Builder
		stages.WriteText(&t, sc.Explanations)
		fmt.Fprintf(&b, "<h2>%s</h2>\n<pre>%s</pre>\n", esc(strings.TrimSuffix(sc.Heading, ":")), esc(t.String()))
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// conditionsLine is how every arm was measured, as a header line.
func conditionsLine(c string) string {
	if c == "" {
		return ""
	}
	return "every arm: " + c
}

// outcomeClass is the CSS class that colours a verdict.
func outcomeClass(o stats.Outcome) string { return "v-" + o.String() }

// htmlHead opens a page: its title, the inline stylesheet, the heading.
func htmlHead(b *strings.Builder, title string) {
	fmt.Fprintf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>\n%s\n</style>\n</head>\n<body>\n<h1>%s</h1>\n", esc(title), css, esc(title))
}

func htmlWarnings(b *strings.Builder, ws []Warning, run int) {
	for _, w := range ws {
		if w.Run == run {
			fmt.Fprintf(b, "<p class=\"warn\">⚠ %s</p>\n", esc(w.Text))
		}
	}
}

func htmlLegend(b *strings.Builder, lines []string) {
	for _, l := range lines {
		fmt.Fprintf(b, "<p class=\"legend\">%s</p>\n", esc(l))
	}
}

func htmlTable(b *strings.Builder, g Table) {
	b.WriteString("<table>\n<tr>")
	for _, h := range g.Header {
		fmt.Fprintf(b, "<th>%s</th>", esc(h))
	}
	b.WriteString("</tr>\n")
	for _, r := range g.Rows {
		b.WriteString("<tr>")
		for i, c := range r {
			cls := ""
			if g.right(i) {
				cls = ` class="num"`
			}
			t := esc(c.String())
			if c.Note > 0 {
				t += fmt.Sprintf(`<sup><a href="#note-%d">%d</a></sup>`, c.Note, c.Note)
			}
			fmt.Fprintf(b, "<td%s>%s</td>", cls, t)
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
}

// barSVG draws a bar chart: bars at the medians, whiskers at the CI.
func barSVG(ch BarChart) string {
	bars := ch.Bars
	const (
		width, left, right, top, barH, gap, bottom = 640.0, 170.0, 70.0, 30.0, 18.0, 10.0, 34.0
	)
	height := top + float64(len(bars))*(barH+gap) + bottom
	var xmax float64
	for _, b := range bars {
		xmax = math.Max(xmax, math.Max(b.Median, b.High))
	}
	ticks, xmax := niceTicks(xmax)
	tickDec := tickDecimals(ticks)
	plotW := width - left - right
	x := func(v float64) float64 { return left + v/xmax*plotW }
	var s strings.Builder
	svgOpen(&s, width, height, left, ch.Title)
	axisY := top + float64(len(bars))*(barH+gap)
	for _, t := range ticks {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x(t), top-4, x(t), axisY)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", x(t), axisY+14, formatFixed(t, tickDec))
	}
	fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", left+plotW/2, axisY+28, esc(ch.Unit))
	for i, b := range bars {
		y := top + float64(i)*(barH+gap)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" font-size="12" text-anchor="end">%s</text>`+"\n", left-6, y+barH-5, esc(b.Label))
		if b.Missing != "" {
			fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" font-size="12" fill="#888">%s</text>`+"\n", left+4, y+barH-5, esc(b.Missing))
			continue
		}
		fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s %s</title></rect>`+"\n",
			left, y, x(b.Median)-left, barH, palette[i%len(palette)], esc(b.Label), esc(FormatNumber(b.Median)), esc(ch.Unit))
		cy := y + barH/2
		fmt.Fprintf(&s, `<path d="M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fV%.1f" stroke="#222" stroke-width="1.5" fill="none"/>`+"\n",
			x(b.Low), cy, x(b.High), x(b.Low), cy-5, cy+5, x(b.High), cy-5, cy+5)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" font-size="11">%s</text>`+"\n", x(math.Max(b.High, b.Median))+4, y+barH-5, esc(FormatNumber(b.Median)))
	}
	s.WriteString("</svg>\n")
	return s.String()
}

// niceTicks returns about five round tick values from 0 and the axis end.
func niceTicks(max float64) ([]float64, float64) {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return []float64{0, 1}, 1
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, f := range []float64{1, 2, 2.5, 5, 10} {
		if f*mag >= raw {
			step = f * mag
			break
		}
	}
	end := math.Ceil(max/step) * step
	var ticks []float64
	for v := 0.0; v <= end+step/2; v += step {
		ticks = append(ticks, v)
	}
	return ticks, end
}

// tickDecimals is the number of decimals that tells the ticks apart
// (0, 5, 10 rather than 0.00, 5.00, 10.0).
func tickDecimals(ticks []float64) int {
	if len(ticks) < 2 {
		return 0
	}
	step := ticks[1] - ticks[0]
	for d := 0; d < 6; d++ {
		if math.Abs(step*math.Pow(10, float64(d))-math.Round(step*math.Pow(10, float64(d)))) < 1e-9 {
			return d
		}
	}
	return 6
}

// svgOpen starts a chart: its size, its title for screen readers and
// tooltips, and the title drawn above the plot at x.
func svgOpen(b *strings.Builder, width, height, x float64, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img">`+"\n", width, height, width, height)
	fmt.Fprintf(b, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(b, `<text x="%.1f" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", x, esc(title))
}

// cdfSVG draws the distributions as lines, percentile over round trip.
func cdfSVG(ch CDFChart) string {
	ss, missing := ch.Series, ch.Missing
	const width, height, left, right, top, bottom = 640.0, 340.0, 56.0, 150.0, 30.0, 40.0
	xmin, xmax := math.Inf(1), 0.0
	for _, s := range ss {
		for _, p := range s.Pts {
			if us := p.Ns / 1e3; us > 0 {
				xmin, xmax = math.Min(xmin, us), math.Max(xmax, us)
			}
		}
	}
	plotW, plotH := width-left-right, height-top-bottom
	// Latency tails are long: when p99.9 is more than 20 times the
	// fastest round trip a linear axis squashes the body of the curve
	// into its first pixels, so the axis becomes logarithmic.
	logScale := xmax > 0 && xmax/xmin > 20
	var ticks []float64
	var x func(float64) float64
	var tickText func(float64) string
	if logScale {
		lo := math.Pow(10, math.Floor(math.Log10(xmin)))
		hi := math.Pow(10, math.Ceil(math.Log10(xmax)))
		for d := lo; d < hi*1.01; d *= 10 {
			for _, f := range []float64{1, 2, 5} {
				if v := d * f; v <= hi*1.01 {
					ticks = append(ticks, v)
				}
			}
		}
		span := math.Log10(hi) - math.Log10(lo)
		x = func(us float64) float64 {
			us = math.Max(us, lo)
			return left + (math.Log10(us)-math.Log10(lo))/span*plotW
		}
		tickText = func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	} else {
		var end float64
		ticks, end = niceTicks(xmax)
		dec := tickDecimals(ticks)
		x = func(us float64) float64 { return left + us/end*plotW }
		tickText = func(v float64) string { return formatFixed(v, dec) }
	}
	y := func(pct float64) float64 { return top + plotH - pct/100*plotH }
	var b strings.Builder
	svgOpen(&b, width, height, left, ch.Name+" round-trip latency CDF")
	for _, t := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x(t), top, x(t), top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", x(t), top+plotH+14, tickText(t))
	}
	for _, p := range []float64{0, 25, 50, 75, 90, 100} {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, y(p), left+plotW, y(p))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%g</text>`+"\n", left-4, y(p)+4, p)
	}
	axis := "round trip (µs)"
	if logScale {
		axis = "round trip (µs, log scale)"
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", left+plotW/2, top+plotH+30, axis)
	fmt.Fprintf(&b, `<text x="14" y="%.1f" font-size="11" text-anchor="middle" transform="rotate(-90 14 %.1f)">percentile</text>`+"\n", top+plotH/2, top+plotH/2)
	for i, s := range ss {
		color := s.Color
		var pts []string
		for _, p := range s.Pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.Ns/1e3), y(p.Percentile)))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"><title>%s</title></polyline>`+"\n", strings.Join(pts, " "), color, esc(s.Label))
		ly := top + 10 + float64(i)*18
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/>`+"\n", left+plotW+12, ly-10, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12">%s</text>`+"\n", left+plotW+30, ly, esc(s.Label))
	}
	for i, l := range missing {
		ly := top + 10 + float64(len(ss)+i)*18
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" fill="#888">%s: no CDF</text>`+"\n", left+plotW+12, ly, esc(l))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
