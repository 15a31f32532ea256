package stages

import (
	"fmt"
	"html"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/units"
)

// Report is the CPU-by-stage part of a run's report (runs taken with
// --profile): one Cell per arm, test and size.
type Report struct {
	Cells []*Cell `json:"cells"`
}

// CSVRow is one stage of one cell in the run report's CSV columns: metric
// "stage_share:<stage>" (unit "%", self share of all samples) and
// "stage_cost:<stage>" (unit Cell.Unit, median over the repeats).
type CSVRow struct {
	Arm, Test    string
	MsgSize      int
	Metric, Unit string
	Value        float64
	N            int
}

// Rows lists the report as CSV rows, cells in run order, stages in report
// order.
func (r *Report) Rows() []CSVRow {
	var out []CSVRow
	for _, c := range r.Cells {
		n := 0
		for _, rep := range c.Repeats {
			if rep.Missing == "" {
				n++
			}
		}
		for _, s := range c.Shares.Stages {
			if s.Self == 0 {
				continue
			}
			out = append(out, CSVRow{c.Arm, c.Test, c.MsgSize, "stage_share:" + string(s.Stage), "%", s.SelfPct, n})
			if v, ok := c.Cost[s.Stage]; ok {
				out = append(out, CSVRow{c.Arm, c.Test, c.MsgSize, "stage_cost:" + string(s.Stage), c.Unit, v, n})
			}
		}
	}
	return out
}

// palette gives each stage a fixed colour, so bars compare across cells.
var palette = map[Stage]string{
	Syscall: "#9e9e9e", Socket: "#8d6e63", TCP: "#1f77b4", UDP: "#17becf", IP: "#2ca02c", Netfilter: "#d62728",
	Conntrack: "#ff7f0e", NAT: "#e377c2", Netdev: "#bcbd22", Veth: "#9467bd", Bridge: "#7f7f7f", Tunnel: "#b8860b",
	OVS: "#393b79", BPF: "#637939", Softirq: "#aec7e8", Wakeup: "#ffbb78", Scheduler: "#c5b0d5",
	Idle: "#eeeeee", KernelRest: "#dbdb8d", OtherProcs: "#f7f7f7",
}

func colour(s Stage) string {
	if c, ok := palette[s]; ok {
		return c
	}
	// user:<comm>: a stable colour from the name.
	h := 0
	for _, r := range string(s) {
		h = h*31 + int(r)
	}
	return fmt.Sprintf("hsl(%d,45%%,70%%)", (h%360+360)%360)
}

// HTML returns a self-contained section: per test and size, one stacked bar
// per arm of the busy stages' self shares (idle and other processes left
// out, the bar is the measurement's CPU), with the cost per unit of work.
func (r *Report) HTML() string {
	var b strings.Builder
	b.WriteString("<h2>CPU by datapath stage (--profile)</h2>\n<p>Self time of each stage in the measured windows, as a share of the measurement's busy CPU (idle and other processes left out); the figure after each bar is the median CPU per transaction (latency, CRR) or per GB (streams) over the repeats. Stages and how a stack is classified: docs/profiling.md.</p>\n")
	type group struct {
		test string
		size int
	}
	var groups []group
	seen := map[group][]*Cell{}
	for _, c := range r.Cells {
		g := group{c.Test, c.MsgSize}
		if _, ok := seen[g]; !ok {
			groups = append(groups, g)
		}
		seen[g] = append(seen[g], c)
	}
	const width, barH, labelW, costW = 560, 18, 120, 170
	for _, g := range groups {
		cells := seen[g]
		fmt.Fprintf(&b, "<h3>%s %s B</h3>\n", html.EscapeString(g.test), units.FormatSize(g.size))
		h := len(cells)*(barH+8) + 8
		fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"CPU by stage, %s\">\n", labelW+width+costW, h, html.EscapeString(g.test))
		used := map[Stage]bool{}
		for i, c := range cells {
			y := 8 + i*(barH+8)
			fmt.Fprintf(&b, "<text x=\"0\" y=\"%d\" font-size=\"12\">%s</text>\n", y+13, html.EscapeString(c.Arm))
			var busy uint64
			for _, s := range c.Shares.Stages {
				if Busy(s.Stage) {
					busy += s.Self
				}
			}
			x := float64(labelW)
			for _, s := range c.Shares.Stages {
				if !Busy(s.Stage) || s.Self == 0 || busy == 0 {
					continue
				}
				w := float64(width) * float64(s.Self) / float64(busy)
				used[s.Stage] = true
				fmt.Fprintf(&b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s: %.1f%% of busy CPU (%.1f%% of all samples)</title></rect>\n",
					x, y, w, barH, colour(s.Stage), html.EscapeString(string(s.Stage)), 100*float64(s.Self)/float64(busy), s.SelfPct)
				x += w
			}
			cost := "cost: " + c.CostMissing
			if c.Total != nil {
				_, short := unitText(c.Unit)
				cost = fmt.Sprintf("%.3g CPU-%s", *c.Total, short)
				if c.Unit == PerTransaction {
					cost += " per txn"
				}
			}
			fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>\n", labelW+width+6, y+13, html.EscapeString(cost))
		}
		b.WriteString("</svg>\n<p>")
		var names []string
		for s := range used {
			names = append(names, string(s))
		}
		sort.Slice(names, func(i, j int) bool { return rankOf(Stage(names[i])) < rankOf(Stage(names[j])) })
		for _, n := range names {
			fmt.Fprintf(&b, "<span style=\"display:inline-block;width:10px;height:10px;background:%s\"></span> %s &nbsp; ", colour(Stage(n)), html.EscapeString(n))
		}
		b.WriteString("</p>\n")
		for _, c := range cells {
			if len(c.Stacks) == 0 {
				continue
			}
			title := fmt.Sprintf("%s %s %sB, all repeats", c.Arm, g.test, units.FormatSize(g.size))
			fmt.Fprintf(&b, "<details><summary>flame graph: %s</summary>\n%s</details>\n", html.EscapeString(title), FlameSVG(c.Stacks, title))
		}
	}
	return b.String()
}

func rankOf(s Stage) int {
	for i, x := range Order {
		if x == s {
			return i
		}
	}
	return len(Order)
}

// WriteText writes one line per cell: the top stages' self shares of the
// busy CPU and the cost per unit of work.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintln(w, "CPU by datapath stage (--profile; self share of the measurement's busy CPU; cost = median per transaction or per GB):")
	for _, c := range r.Cells {
		var busy uint64
		var ss []Share
		for _, s := range c.Shares.Stages {
			if Busy(s.Stage) && s.Self > 0 {
				busy += s.Self
				ss = append(ss, s)
			}
		}
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].Self > ss[j].Self })
		var parts []string
		for i, s := range ss {
			if i == 6 {
				break
			}
			parts = append(parts, fmt.Sprintf("%s %.0f%%", s.Stage, 100*float64(s.Self)/float64(busy)))
		}
		cost := c.CostMissing
		if c.Total != nil {
			long, _ := unitText(c.Unit)
			cost = strconv.FormatFloat(*c.Total, 'g', 3, 64) + " " + long
		}
		fmt.Fprintf(w, "  %-12s %s %sB: %s; %s\n", c.Arm, c.Test, units.FormatSize(c.MsgSize), cost, strings.Join(parts, ", "))
		if line := programLine(c.Shares, busy); line != "" {
			fmt.Fprintf(w, "  %-12s   ebpf by program: %s\n", "", line)
		}
	}
}

// programLine tells the ebpf stage's time by program, as shares of the
// busy CPU like the stages beside it: the six largest, with their role
// where known ("tail_handle_ipv4 (pod) 4.1%").
func programLine(b Breakdown, busy uint64) string {
	var parts []string
	for _, p := range b.Programs {
		if p.Self == 0 || busy == 0 {
			continue
		}
		if len(parts) == 6 {
			parts = append(parts, "…")
			break
		}
		name := p.Name
		if p.Role != "" {
			name += " (" + p.Role + ")"
		}
		parts = append(parts, fmt.Sprintf("%s %.1f%%", name, 100*float64(p.Self)/float64(busy)))
	}
	return strings.Join(parts, ", ")
}
