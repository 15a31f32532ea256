package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
)

// The renderers must never print a missing value as a number.
func TestMissingIsNeverZero(t *testing.T) {
	run, ss := kubeOVNRun()
	m := Analyze(run, ss)
	c := m.Cell("underlay", result.UDPBW, 4096, "receiver_mbps")
	if c == nil || len(c.Values) != 0 || !strings.Contains(c.Missing, "connection refused") {
		t.Fatalf("failed cell = %+v", c)
	}
	var rep JSONReport
	if err := json.Unmarshal(render(t, FormatJSON, Input{run, ss}), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Schema != "cnibench.report/v1" || len(rep.Runs) != 1 {
		t.Fatalf("schema %q, %d runs", rep.Schema, len(rep.Runs))
	}
	found := false
	for _, mi := range rep.Runs[0].Missing {
		if mi.Arm == "underlay" && mi.Test == "udp_bw" && mi.MsgSize == 4096 && mi.Metric == "receiver_mbps" {
			found = true
		}
	}
	if !found {
		t.Error("JSON missing list lacks the failed cell")
	}
	for _, c := range rep.Runs[0].Cells {
		if c.Arm == "underlay" && c.Test == "udp_bw" && c.MsgSize == 4096 {
			t.Errorf("JSON has a cell for a failed measurement: %+v", c)
		}
		if c.Arm == "host" && strings.HasSuffix(c.Test, "_lat") && strings.Contains(c.Metric, "cpu") {
			t.Errorf("qperf reported no CPU, yet JSON has %s", c.Metric)
		}
	}
	// The CSV row of the failed cell has empty numbers and the reason.
	rows, err := csv.NewReader(bytes.NewReader(render(t, FormatCSV, Input{run, ss}))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows[1:] {
		if len(r) != len(CSVHeader) {
			t.Fatalf("CSV row has %d fields, header %d", len(r), len(CSVHeader))
		}
		if r[4] == "underlay" && r[5] == "udp_bw" && r[6] == "4096" && r[7] == "receiver_mbps" {
			if r[9] != "" || !strings.Contains(r[24], "connection refused") {
				t.Errorf("CSV failed row = %v", r)
			}
		}
	}
}

// Ratios, verdict directions and flags follow from the input numbers.
func TestCellStatistics(t *testing.T) {
	run, ss := kubeOVNRun()
	m := Analyze(run, ss)
	c := m.Cell("overlay", result.TCPLat, 1, "one_way_mean_us")
	// Input: overlay 15.2 µs, host 16.6 µs, identical relative jitter, so
	// the ratio of medians is exactly 15.2/16.6.
	if math.Abs(c.Ratio.Value-15.2/16.6) > 1e-12 {
		t.Errorf("ratio %v, want %v", c.Ratio.Value, 15.2/16.6)
	}
	if c.Verdict.String() != "faster by 8.4% (p=0.0079)" {
		t.Errorf("latency verdict %q", c.Verdict.String())
	}
	bw := m.Cell("overlay", result.TCPBW, 1, "receiver_mbps")
	if bw.Verdict.Text("faster", "slower") != "slower by 4.8% (p=0.0079)" {
		t.Errorf("throughput verdict %q", bw.Verdict.Text("faster", "slower"))
	}
	if m.Cell("host", result.TCPLat, 1, "one_way_mean_us").Ratio != nil {
		t.Error("the baseline has a ratio to itself")
	}
	noisy := m.Cell("overlay", result.UDPLat, 1024, "one_way_mean_us")
	if noisy.Summary.CV <= NoisyCV || !has(noisy.Flags, "noisy") {
		t.Errorf("noisy cell: cv %v flags %v", noisy.Summary.CV, noisy.Flags)
	}
	if !has(m.Cell("underlay", result.TCPLat, 1, "one_way_mean_us").Flags, "steal") {
		t.Error("steal 2.5% not flagged")
	}
	if has(c.Flags, "steal") || has(c.Flags, "noisy") {
		t.Errorf("quiet cell flagged %v", c.Flags)
	}
	var codes []string
	for _, f := range m.Flags {
		codes = append(codes, f.Code)
	}
	if strings.Join(codes, ",") != "no-cpufreq,steal,noisy" {
		t.Errorf("run flags %v", codes)
	}
	if m.Shape != ShapeLatency || len(m.Columns) != 12 {
		t.Errorf("shape %s, %d columns", m.Shape, len(m.Columns))
	}
}

func TestIncompleteRun(t *testing.T) {
	run, ss := ciliumRun(3, ubuntu20, 1)
	run.Complete, run.Status = false, "interrupted after 9 of 15 samples"
	ss = ss[:9]
	// Drop geneve entirely: its cells must say the run stopped.
	var kept []store.Sample
	for _, s := range ss {
		if s.Arm != "geneve" {
			kept = append(kept, s)
		}
	}
	m := Analyze(run, kept)
	c := m.Cell("geneve", result.TCPBW, 131072, "receiver_mbps")
	if c == nil || !strings.Contains(c.Missing, "run stopped") {
		t.Errorf("geneve cell = %+v", c)
	}
	if len(m.Flags) == 0 || m.Flags[0].Code != "incomplete" || !strings.Contains(m.Flags[0].Message, "interrupted") {
		t.Errorf("flags %v", m.Flags)
	}
	out := string(render(t, FormatTable, Input{run, kept}))
	if !strings.Contains(out, "— [1]") || !strings.Contains(out, "incomplete") {
		t.Errorf("table:\n%s", out)
	}
}

func TestUnknownFormat(t *testing.T) {
	run, ss := ciliumRun(3, ubuntu20, 1)
	err := Render(&bytes.Buffer{}, "pdf", run, ss)
	if err == nil || !strings.Contains(err.Error(), "table, markdown, json, csv, html") {
		t.Errorf("Render(pdf) = %v", err)
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int]string{1: "1B", 1000: "1000B", 1024: "1K", 4096: "4K", 65536: "64K", 1 << 20: "1M"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
	for v, want := range map[float64]string{9.714: "9.71", 15.24: "15.2", 162.4: "162", 0.01234: "0.0123", 15816: "15816"} {
		if got := FormatNumber(v); got != want {
			t.Errorf("FormatNumber(%v) = %q, want %q", v, got, want)
		}
	}
}

func has(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// A run killed before its first sample still renders, in every format,
// and says it is incomplete.
func TestEmptyRun(t *testing.T) {
	for _, run := range []*store.Run{
		{ID: 1, Name: "empty", Baseline: "host", Arms: []store.Arm{{Name: "host"}, {Name: "vxlan"}}, Status: "interrupted before the first sample"},
		{ID: 2, Name: "bare"},
	} {
		for _, f := range Formats {
			out := string(render(t, f, Input{run, nil}))
			if f != FormatCSV && !strings.Contains(out, "incomplete") {
				t.Errorf("%s of an empty run does not say it is incomplete:\n%s", f, out)
			}
		}
	}
}

func TestBaselineWithoutSamples(t *testing.T) {
	run, ss := ciliumRun(3, ubuntu20, 1)
	run.Baseline = "host" // not an arm of this run
	m := Analyze(run, ss)
	if m.Baseline != "" || m.Cell("vxlan", result.TCPBW, 131072, "receiver_mbps").Ratio != nil {
		t.Error("ratios against an arm without samples")
	}
	if len(m.Flags) == 0 || m.Flags[0].Code != "no-baseline" {
		t.Errorf("flags %v", m.Flags)
	}
}

// The report.metrics label adds columns; a missing one carries the
// result's own reason.
func TestExtraMetricColumns(t *testing.T) {
	run, ss := kubeOVNRun()
	run.Labels = map[string]string{LabelMetrics: "client_cpu_pct, nonsense"}
	m := Analyze(run, ss)
	var headers []string
	for _, c := range m.Columns {
		headers = append(headers, c.Header)
	}
	if len(m.Columns) != 24 || !has(headers, "tcp_lat 1B client CPU (%)") || !has(headers, "tcp_bw 4K CPU (sender) (%)") {
		t.Fatalf("columns %q", headers)
	}
	out := string(render(t, FormatMarkdown, Input{run, ss}))
	if !strings.Contains(out, "qperf does not report per-side CPU") {
		t.Errorf("missing CPU of the qperf arm lacks its reason:\n%s", out)
	}
}

// A k8s run's agents' CPU (k8s run --agent-cpu) fills the lab's datapath
// CPU column, named for what it is.
func TestK8sAgentsCPUColumn(t *testing.T) {
	run, ss := kubeOVNRun()
	for i := range ss {
		if r := ss[i].Result; r != nil {
			if r.CPU == nil {
				r.CPU = &result.CPU{}
			}
			r.CPU.Datapath = &result.DatapathCPU{Process: "agents: kube-proxy on n1", Seconds: result.F(0.01), Pct: result.F(0.2)}
		}
	}
	header := func(kind string) string {
		run.Kind = kind
		for _, c := range Analyze(run, ss).Columns {
			if strings.Contains(c.Header, "datapath") {
				return c.Header
			}
		}
		return ""
	}
	if h := header(store.KindK8s); h != "tcp_lat 1B datapath agents CPU (%)" {
		t.Errorf("k8s run: %q", h)
	}
	if h := header(store.KindLab); !strings.Contains(h, "datapath CPU (ovs-vswitchd)") {
		t.Errorf("lab run: %q", h)
	}
}

func TestUDPThroughputShowsLoss(t *testing.T) {
	run, ss := ciliumRun(3, ubuntu20, 1)
	for i := range ss {
		ss[i].Test, ss[i].MsgSize = result.UDPBW, 1400
		ss[i].Result = bwResult(result.UDPBW, 1400, 900, 50, 60, "")
	}
	m := Analyze(run, ss)
	last := m.Columns[len(m.Columns)-1]
	if m.Shape != ShapeThroughput || last.Header != "loss (%)" {
		t.Errorf("shape %s, last column %q", m.Shape, last.Header)
	}
}

func TestMedianCV(t *testing.T) {
	run, ss := kubeOVNRun()
	cv, n := Analyze(run, ss).MedianCV()
	// 35 of the 36 table cells have values (one failed): 34 spread by the
	// jitter factors, one by the noisy ones. The median is the jitter's CV,
	// computed here from the factors alone.
	f := make([]float64, len(jitter))
	for i, j := range jitter {
		f[i] = 1 + j
	}
	if n != 35 || math.Abs(cv-stats.CV(f)) > 1e-9 {
		t.Errorf("MedianCV = %v over %d cells, want %v over 35", cv, n, stats.CV(f))
	}
}

// With 3 repeats per arm the exact test cannot reach p < 0.05; the
// report must say so rather than print a bare "n.s.".
func TestTooFewRepeatsExplained(t *testing.T) {
	run, ss := ciliumRun(3, ubuntu20, 1)
	var kept []store.Sample
	for _, s := range ss {
		if s.Repeat < 3 {
			kept = append(kept, s)
		}
	}
	for _, f := range []string{FormatTable, FormatMarkdown, FormatHTML} {
		out := string(render(t, f, Input{run, kept}))
		// A terminal wraps the verdict inside its cell.
		verdict := "undecided (≈1 more)"
		if f == FormatTable {
			verdict = "│ undecided"
		}
		if !strings.Contains(out, verdict) || !strings.Contains(out, "3+3 repeats cannot reach p&lt;0.05") && !strings.Contains(out, "3+3 repeats cannot reach p<0.05") {
			t.Errorf("%s does not explain the 3-repeat verdicts:\n%s", f, out)
		}
	}
}
