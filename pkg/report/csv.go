package report

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
)

// CSVHeader is the CSV report's columns: one row per run × arm × test × msg
// size × metric. Empty fields are values that do not exist (reason in
// missing_reason), never zeros.
var CSVHeader = []string{"run_id", "run_name", "host", "kernel", "arm", "test", "msg_size_bytes", "metric", "unit",
	"median", "ci_low", "ci_high", "ci_level", "n", "failed", "mean", "stddev", "cv",
	"ratio", "ratio_ci_low", "ratio_ci_high", "p_vs_baseline", "verdict", "flags", "missing_reason"}

func csvNum(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'g', 10, 64)
}

func writeCSV(w io.Writer, models []*Model) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	rep := buildJSON(models)
	for _, r := range rep.Runs {
		id := strconv.FormatInt(r.ID, 10)
		rows := map[[4]string][]string{}
		var order [][4]string
		for _, c := range r.Cells {
			row := []string{id, r.Name, r.Host.Hostname, r.Host.Kernel, c.Arm, c.Test, strconv.Itoa(c.MsgSize), c.Metric, c.Unit,
				csvNum(c.Median), csvNum(c.MedianCI.Low), csvNum(c.MedianCI.High), strconv.FormatFloat(c.MedianCI.Level, 'g', 6, 64),
				strconv.Itoa(c.N), strconv.Itoa(c.Failed), csvNum(c.Mean), csvNum(c.Stddev), csvNum(c.CV),
				"", "", "", "", "", strings.Join(c.Flags, ";"), ""}
			if v := c.VsBaseline; v != nil {
				row[18], row[19], row[20], row[21], row[22] = csvNum(v.Ratio), csvNum(v.RatioCI.Low), csvNum(v.RatioCI.High), csvNum(v.P), v.Verdict
			}
			k := [4]string{c.Arm, c.Test, strconv.Itoa(c.MsgSize), c.Metric}
			rows[k] = row
			order = append(order, k)
		}
		for _, mi := range r.Missing {
			row := []string{id, r.Name, r.Host.Hostname, r.Host.Kernel, mi.Arm, mi.Test, strconv.Itoa(mi.MsgSize), mi.Metric, "",
				"", "", "", "", "0", "", "", "", "", "", "", "", "", "", "", mi.Reason}
			k := [4]string{mi.Arm, mi.Test, strconv.Itoa(mi.MsgSize), mi.Metric}
			rows[k] = row
			order = append(order, k)
		}
		// Report order (the model's), not values-first-then-missing.
		for _, k := range modelOrder(models, r.ID, order) {
			if err := cw.Write(rows[k]); err != nil {
				return err
			}
		}
		if r.Stages != nil {
			for _, s := range r.Stages.Rows() {
				row := make([]string, len(CSVHeader))
				copy(row, []string{id, r.Name, r.Host.Hostname, r.Host.Kernel, s.Arm, s.Test, strconv.Itoa(s.MsgSize), s.Metric, s.Unit,
					strconv.FormatFloat(s.Value, 'g', 6, 64)})
				row[13] = strconv.Itoa(s.N)
				if err := cw.Write(row); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// modelOrder sorts keys in the order the run's model lists its cells.
func modelOrder(models []*Model, runID int64, keys [][4]string) [][4]string {
	for _, m := range models {
		if m.Run.ID != runID {
			continue
		}
		var out [][4]string
		have := map[[4]string]bool{}
		for _, k := range keys {
			have[k] = true
		}
		for _, ck := range m.Keys {
			k := [4]string{ck.Arm, ck.Test, strconv.Itoa(ck.Size), ck.Metric}
			if have[k] {
				out = append(out, k)
				delete(have, k)
			}
		}
		return out
	}
	return keys
}
