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
	"ratio", "ratio_ci_low", "ratio_ci_high", "p_vs_baseline", "verdict", "flags", "missing_reason", "outcome"}

func csvNum(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'g', 10, 64)
}

// writeCSV prints the cells of the document's runs, a row per cell in the
// report's order (the figures of the JSON document), then the run's CPU
// by stage.
func writeCSV(w io.Writer, models []*Model) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	for _, m := range models {
		r := m.Run
		id := strconv.FormatInt(r.ID, 10)
		for _, k := range m.Keys {
			c := m.cells[k]
			row := make([]string, len(CSVHeader))
			copy(row, []string{id, r.Name, r.Host.Hostname, r.Host.Kernel, k.Arm, k.Test, strconv.Itoa(k.Size), k.Metric})
			if len(c.Values) == 0 {
				row[13], row[24] = "0", c.Missing
			} else {
				j := jsonCell(c)
				copy(row[8:], []string{j.Unit, csvNum(j.Median), csvNum(j.MedianCI.Low), csvNum(j.MedianCI.High),
					strconv.FormatFloat(j.MedianCI.Level, 'g', 6, 64), strconv.Itoa(j.N), strconv.Itoa(j.Failed),
					csvNum(j.Mean), csvNum(j.Stddev), csvNum(j.CV)})
				if v := j.VsBaseline; v != nil {
					copy(row[18:], []string{csvNum(v.Ratio), csvNum(v.RatioCI.Low), csvNum(v.RatioCI.High), csvNum(v.P), v.Verdict})
					row[25] = v.Outcome
				}
				row[23] = strings.Join(j.Flags, ";")
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
		if m.Stages != nil {
			for _, s := range m.Stages.Rows() {
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
