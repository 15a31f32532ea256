package report

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// OpenMetrics: every cell of the report as gauges, for Prometheus (scraped
// from a file, or pushed to a Pushgateway, push.go), so a fleet's runs end
// up beside the rest of its monitoring. A family lists its samples
// together, as the format requires; a cell with no values has only its
// sample count (0), never a zero median.

// FormatOpenMetrics is the OpenMetrics 1.0 text format.
const FormatOpenMetrics = "openmetrics"

// openMetricsFamilies are the gauges, in the order written.
var openMetricsFamilies = []struct {
	name, help string
	value      func(j JSONCell) *float64
}{
	{"cnibench_median", "median of the cell's samples, in the unit of label unit", func(j JSONCell) *float64 { return j.Median }},
	{"cnibench_median_ci_lower", "lower bound of the median's confidence interval (level in label ci_level)", func(j JSONCell) *float64 { return j.MedianCI.Low }},
	{"cnibench_median_ci_upper", "upper bound of the median's confidence interval (level in label ci_level)", func(j JSONCell) *float64 { return j.MedianCI.High }},
	{"cnibench_samples", "samples in the cell (failed steps not counted)", func(j JSONCell) *float64 { v := float64(j.N); return &v }},
	{"cnibench_ratio_to_baseline", "ratio of the cell's median to the baseline arm's", func(j JSONCell) *float64 {
		if j.VsBaseline == nil {
			return nil
		}
		return j.VsBaseline.Ratio
	}},
}

// writeOpenMetrics prints the document's runs and cells as OpenMetrics
// text: first whether each run is complete (an interrupted run's cells
// hold what it finished), then the cells' gauges.
func writeOpenMetrics(w io.Writer, models []*Model) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# TYPE cnibench_run_complete gauge\n# HELP cnibench_run_complete 1 when every planned sample of the run was taken, 0 when it is incomplete (label state)\n")
	for _, m := range models {
		v, state := 0, "incomplete"
		if m.Run.Complete {
			v, state = 1, "complete"
		}
		fmt.Fprintf(bw, "cnibench_run_complete{%s} %d\n", openMetricsLabels(append(runLabels(m), [2]string{"state", state})), v)
	}
	for _, f := range openMetricsFamilies {
		fmt.Fprintf(bw, "# TYPE %s gauge\n# HELP %s %s\n", f.name, f.name, f.help)
		for _, m := range models {
			run := runLabels(m)
			for _, k := range m.Keys {
				c := m.cells[k]
				if len(c.Values) == 0 && f.name != "cnibench_samples" {
					continue // not measured: no figure, never a zero
				}
				j := jsonCell(c)
				v := f.value(j)
				if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
					continue
				}
				labels := append(append([][2]string{}, run...),
					[2]string{"arm", k.Arm}, [2]string{"test", k.Test}, [2]string{"size", strconv.Itoa(k.Size)},
					[2]string{"metric", k.Metric}, [2]string{"unit", j.Unit})
				if strings.HasPrefix(f.name, "cnibench_median_ci") {
					labels = append(labels, [2]string{"ci_level", strconv.FormatFloat(j.MedianCI.Level, 'g', 4, 64)})
				}
				fmt.Fprintf(bw, "%s{%s} %s\n", f.name, openMetricsLabels(labels), strconv.FormatFloat(*v, 'g', -1, 64))
			}
		}
	}
	fmt.Fprintln(bw, "# EOF")
	return bw.Flush()
}

// runLabels are the labels every sample of a run carries: which run of
// which experiment, and the host it ran on.
func runLabels(m *Model) [][2]string {
	r := m.Run
	return [][2]string{
		{"run", r.Name}, {"run_id", strconv.FormatInt(r.ID, 10)}, {"experiment", r.ExperimentName}, {"kind", r.Kind},
		{"host", r.Host.Hostname}, {"kernel", r.Host.Kernel}, {"distro", r.Host.Distro}, {"cpu", r.Host.CPUModel},
		{"cnibench", r.Host.Cnibench},
	}
}

func openMetricsLabels(ls [][2]string) string {
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l[0])
		b.WriteString(`="`)
		b.WriteString(escapeLabel(l[1]))
		b.WriteByte('"')
	}
	return b.String()
}

// escapeLabel escapes a label value as OpenMetrics and the Prometheus text
// format both read it.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
