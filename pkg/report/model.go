// Package report turns a stored run into the tables of the source
// documents — arms as rows, a test's metric (with its unit) as columns, one
// column per message size where sizes vary — with each cell's median, 95%
// confidence interval and ratio to the run's baseline arm, and renders them
// as a terminal table, markdown, JSON, CSV or a self-contained HTML page
// with SVG charts.
//
// All numbers come from pkg/stats over the raw samples in the store; a
// value that was not measured is shown as "—" with its reason, never as 0.
package report

import (
	"fmt"
	"github.com/cnibench/cnibench/pkg/stages"
	"math"
	"sort"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/units"
)

// Shapes of a run's main table.
const (
	// ShapeLatency is the Kube-OVN/qperf shape: one column per test
	// (tcp_lat, udp_lat, tcp_bw, udp_bw …) and message size, each showing
	// the test's primary metric.
	ShapeLatency = "latency"
	// ShapeThroughput is the Cilium/iperf3 shape, used when a run measures
	// only bandwidth: bitrate and transfer on each side, and sender and
	// receiver CPU.
	ShapeThroughput = "throughput"
)

// NoisyCV is the coefficient of variation above which a cell is flagged noisy.
const NoisyCV = 0.05

// StealPct is the steal time (percent of CPU) above which a cell is flagged:
// another VM took CPU from this one while it was measuring.
const StealPct = 1.0

// metric is a result.Metric with what a report needs to show it.
type metric struct {
	result.Metric
	Label string // column header without unit, e.g. "bitrate (receiver)"
	// missingPaths are the result.Missing keys that explain an absent
	// value, most specific first.
	missingPaths []string
}

func fromResult(name, label string, paths ...string) metric {
	m, ok := result.Metrics[name]
	if !ok {
		panic("report: unknown metric " + name) // a programming error caught by any test
	}
	return metric{Metric: m, Label: label, missingPaths: paths}
}

// Transfer is not among result.Metrics: the Cilium table shows it, so the
// report derives it from the byte counters.
var (
	mSenderGB   = transferGB("sender", "bytes_sent", func(t *result.Throughput) *int64 { return t.BytesSent })
	mReceiverGB = transferGB("receiver", "bytes_received", func(t *result.Throughput) *int64 { return t.BytesReceived })
)

// transferGB is the metric "<side>_gbytes": the byte counter of the
// throughput that bytes picks, field being its JSON name.
func transferGB(side, field string, bytes func(*result.Throughput) *int64) metric {
	return metric{Metric: result.Metric{Name: side + "_gbytes", Unit: "GB", HigherIsBetter: true,
		Get: func(r *result.Result) (float64, bool) {
			if r.Throughput == nil || bytes(r.Throughput) == nil {
				return 0, false
			}
			return float64(*bytes(r.Throughput)) / 1e9, true
		}}, Label: "transfer (" + side + ")", missingPaths: []string{"throughput." + field, "throughput"}}
}

var (
	mOneWay    = fromResult("one_way_mean_us", "one-way mean", "latency.one_way_ns.mean", "latency.one_way_ns", "latency")
	mRTT50     = fromResult("rtt_p50_us", "RTT p50", "latency.rtt_ns.p50", "latency.rtt_ns", "latency")
	mRTT99     = fromResult("rtt_p99_us", "RTT p99", "latency.rtt_ns.p99", "latency.rtt_ns", "latency")
	mTPS       = fromResult("transactions_per_sec", "transactions", "transactions")
	mRecvMbps  = fromResult("receiver_mbps", "bitrate (receiver)", "throughput.receiver_bps", "throughput")
	mSendMbps  = fromResult("sender_mbps", "bitrate (sender)", "throughput.sender_bps", "throughput")
	mRecvKpps  = fromResult("receiver_kpps", "packets (receiver)", "throughput.receiver_pps", "throughput")
	mLoss      = fromResult("udp_loss_pct", "loss", "udp.loss_pct", "udp")
	mClientCPU = fromResult("client_cpu_pct", "CPU (sender)", "cpu.client.process_pct", "cpu.client", "cpu")
	mServerCPU = fromResult("server_cpu_pct", "CPU (receiver)", "cpu.server.process_pct", "cpu.server", "cpu")
	mCPUPerGB  = fromResult("server_cpu_s_per_gb", "receiver CPU per GB", "cpu.server.seconds_per_gb", "cpu.server", "cpu")
	mCPUPerTxn = fromResult("client_cpu_us_per_txn", "client CPU per txn", "cpu.client.us_per_transaction", "cpu.client", "cpu")
	// The userspace datapath's daemon (OVS-DPDK's ovs-vswitchd, PMDs
	// included), on the arms whose lab has one.
	mDatapathCPU    = fromResult("datapath_cpu_pct", "datapath CPU (ovs-vswitchd)", "cpu.datapath.pct", "cpu.datapath", "cpu")
	mDatapathPerTxn = fromResult("datapath_cpu_us_per_txn", "datapath CPU per txn", "cpu.datapath.us_per_transaction", "cpu.datapath", "cpu")
	mDatapathPerGB  = fromResult("datapath_cpu_s_per_gb", "datapath CPU per GB", "cpu.datapath.seconds_per_gb", "cpu.datapath", "cpu")
	mPMDBusy        = fromResult("pmd_busy_pct", "PMD busy", "cpu.datapath.pmd_busy_pct", "cpu.datapath", "cpu")
	mClientCPULat   = metric{Metric: mClientCPU.Metric, Label: "client CPU", missingPaths: mClientCPU.missingPaths}
	mServerCPULat   = metric{Metric: mServerCPU.Metric, Label: "server CPU", missingPaths: mServerCPU.missingPaths}
)

// primary is the metric the latency-shape table shows for a test.
func primary(test string) metric {
	switch test {
	case result.TCPLat, result.UDPLat:
		return mOneWay
	case result.TCPCRR:
		return mTPS
	default:
		return mRecvMbps
	}
}

// throughputColumns are the Cilium table's measurements. The client sends
// in a *_bw test, so the client is the sender and the server the receiver.
var throughputColumns = []metric{mSendMbps, mRecvMbps, mSenderGB, mReceiverGB, mClientCPU, mServerCPU}

// allMetrics are the metrics JSON and CSV report for a test when present.
func allMetrics(test string) []metric {
	switch test {
	case result.TCPLat, result.UDPLat:
		return []metric{mOneWay, mRTT50, mRTT99, mTPS, mClientCPULat, mServerCPULat, mCPUPerTxn, mDatapathCPU, mDatapathPerTxn, mPMDBusy}
	case result.TCPCRR:
		return []metric{mTPS, mRTT50, mRTT99, mClientCPULat, mServerCPULat, mCPUPerTxn, mDatapathCPU, mDatapathPerTxn, mPMDBusy}
	case result.UDPBW:
		return []metric{mRecvMbps, mSendMbps, mSenderGB, mReceiverGB, mRecvKpps, mLoss, mClientCPU, mServerCPU, mCPUPerGB, mDatapathCPU, mDatapathPerGB, mPMDBusy}
	default:
		return []metric{mRecvMbps, mSendMbps, mSenderGB, mReceiverGB, mClientCPU, mServerCPU, mCPUPerGB, mDatapathCPU, mDatapathPerGB, mPMDBusy}
	}
}

// cellKey names one cell: arm × test × message size × metric.
type cellKey struct {
	Arm, Test string
	Size      int
	Metric    string
}

// group is (test, size): what the arms are compared on.
type group struct {
	Test string
	Size int
}

// Column is one column of the main table.
type Column struct {
	Test   string
	Size   int
	metric metric
	// Header is e.g. "tcp_lat 1K (µs)"; Unit is the display unit after
	// scaling (Mb/s becomes Gb/s for fast paths); Scale multiplies values.
	Header, Unit string
	Scale        float64
}

// Cell is the statistics of one arm × test × size × metric.
type Cell struct {
	Arm, Test string
	Size      int
	Metric    string
	Unit      string
	// HigherIsBetter is the metric's direction, used by ratios and verdicts.
	HigherIsBetter bool
	Values         []float64 // in Unit, execution order
	Failed         int       // samples of this arm/test/size that failed outright
	Summary        stats.Summary
	// Ratio is this arm's median over the baseline arm's (nil for the
	// baseline itself or without one); Verdict tests this arm against it.
	Ratio   *stats.Ratio
	Verdict *stats.Verdict
	Flags   []string
	// Missing is why there is no value; set exactly when len(Values) == 0.
	Missing string
	// CDF is the round-trip distribution of the sample closest to the
	// median (latency tests that recorded one).
	CDF []result.CDFPoint
	// Modes is set when the values form two modes (FlagModes).
	Modes *Modes
}

// Flag is a run-level warning about the trustworthiness of its numbers.
type Flag struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Model is a run analysed for rendering.
type Model struct {
	Run      *store.Run
	Shape    string
	Arms     []string
	Baseline string // "" when the run has none or its baseline has no samples
	Groups   []group
	Columns  []Column
	cells    map[cellKey]*Cell
	// Keys lists every cell with a value or a reason, in report order.
	Keys  []cellKey
	Flags []Flag
	// Stages is CPU by datapath stage (--profile), rendered after the cells.
	Stages *stages.Report
	// ArmConditions says how each arm was measured (see ArmConditions).
	ArmConditions map[string]string
	// Margin is the equivalence margin the verdicts used (a fraction).
	Margin float64
	// IdleWakeup is the host's idle wake-up penalty, measured once at the
	// start of the run (nil when the run did not measure it).
	IdleWakeup *result.IdleWakeup
}

// Cell returns the cell for a key, or nil.
func (m *Model) Cell(arm, test string, size int, metricName string) *Cell {
	return m.cells[cellKey{arm, test, size, metricName}]
}

// cell is arm's cell in a table column, or nil.
func (m *Model) cell(arm string, col Column) *Cell {
	return m.cells[cellKey{arm, col.Test, col.Size, col.metric.Name}]
}

// Analyze computes every cell of a run with the default Options.
func Analyze(run *store.Run, samples []store.Sample) *Model {
	return Options{}.Analyze(run, samples)
}

// Analyze computes every cell of a run, its verdicts judged with o.
func (o Options) Analyze(run *store.Run, samples []store.Sample) *Model {
	m := &Model{Run: run, cells: map[cellKey]*Cell{}, Margin: o.margin()}
	ss := append([]store.Sample(nil), samples...)
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].Seq < ss[j].Seq })
	ss, retaken := splitRetaken(ss)
	m.ArmConditions = ArmConditions(ss)
	for _, s := range ss {
		if c := conditionsOf(s.Result); c != nil && c.IdleWakeup != nil {
			m.IdleWakeup = c.IdleWakeup
			break
		}
	}

	// Arms in the experiment's order, then any only the samples name.
	seen := map[string]bool{}
	for _, a := range run.Arms {
		if !seen[a.Name] {
			seen[a.Name] = true
			m.Arms = append(m.Arms, a.Name)
		}
	}
	groups := map[group]bool{}
	bySample := map[group]map[string][]store.Sample{}
	for _, s := range ss {
		if !seen[s.Arm] {
			seen[s.Arm] = true
			m.Arms = append(m.Arms, s.Arm)
		}
		g := group{s.Test, s.MsgSize}
		groups[g] = true
		if bySample[g] == nil {
			bySample[g] = map[string][]store.Sample{}
		}
		bySample[g][s.Arm] = append(bySample[g][s.Arm], s)
	}
	for g := range groups {
		m.Groups = append(m.Groups, g)
	}
	sortGroups(m.Groups)

	m.Shape = ShapeThroughput
	for _, g := range m.Groups {
		if g.Test != result.TCPBW && g.Test != result.UDPBW {
			m.Shape = ShapeLatency
		}
	}
	if len(m.Groups) == 0 {
		m.Shape = ShapeLatency
	}

	// Cells: every metric of every group, for every arm.
	tableMetric := map[group]map[string]bool{}
	for _, g := range m.Groups {
		tableMetric[g] = map[string]bool{}
		for _, mt := range m.tableMetrics(g.Test) {
			tableMetric[g][mt.Name] = true
		}
		for _, mt := range allMetrics(g.Test) {
			for _, arm := range m.Arms {
				c := m.analyzeCell(arm, g, mt, bySample[g][arm])
				m.cells[cellKey{arm, g.Test, g.Size, mt.Name}] = c
			}
		}
	}

	// Baseline: as named by the run, if it has samples.
	if run.Baseline != "" {
		for _, g := range m.Groups {
			if len(bySample[g][run.Baseline]) > 0 {
				m.Baseline = run.Baseline
			}
		}
	}
	if m.Baseline != "" {
		for k, c := range m.cells {
			if k.Arm == m.Baseline || len(c.Values) == 0 {
				continue
			}
			base := m.cells[cellKey{m.Baseline, k.Test, k.Size, k.Metric}]
			if base == nil || len(base.Values) == 0 {
				continue
			}
			r := stats.RatioOfMedians(c.Values, base.Values)
			v := o.judge(base.Values, c.Values, c.HigherIsBetter)
			c.Ratio, c.Verdict = &r, &v
		}
	}

	// Keep the cells worth reporting: those with values, and missing ones
	// that a table shows or that are the test's primary metric.
	for _, g := range m.Groups {
		for _, arm := range m.Arms {
			for _, mt := range allMetrics(g.Test) {
				c := m.cells[cellKey{arm, g.Test, g.Size, mt.Name}]
				if len(c.Values) > 0 || tableMetric[g][mt.Name] || mt.Name == primary(g.Test).Name {
					m.Keys = append(m.Keys, cellKey{arm, g.Test, g.Size, mt.Name})
				} else {
					delete(m.cells, cellKey{arm, g.Test, g.Size, mt.Name})
				}
			}
		}
	}

	m.buildColumns()
	m.Flags = append(runFlags(run, ss, m), conditionFlags(m, ss, retaken)...)
	m.Flags = append(m.Flags, precisionFlags(m)...)
	return m
}

func testOrder(t string) int {
	for i, x := range result.Tests {
		if x == t {
			return i
		}
	}
	return len(result.Tests)
}

func (m *Model) tableMetrics(test string) []metric {
	return tableMetricsFor(m.Shape, test, extraMetrics(m.Run))
}

// LabelMetrics is the run label that adds columns to the table: a
// comma-separated list of metric names (e.g. "udp_loss_pct,server_cpu_s_per_gb"),
// shown for every test whose results carry them.
const LabelMetrics = "report.metrics"

func extraMetrics(run *store.Run) []string {
	var out []string
	for _, f := range strings.Split(run.Labels[LabelMetrics], ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// tableMetricsFor is the columns of one test in a table of the given
// shape: the primary metric (latency shape) or the Cilium measurements
// (throughput shape, plus loss for UDP), then any extra metrics asked for.
func tableMetricsFor(shape, test string, extra []string) []metric {
	var mts []metric
	if shape == ShapeThroughput {
		mts = append(mts, throughputColumns...)
		if test == result.UDPBW {
			mts = append(mts, mLoss)
		}
	} else {
		mts = append(mts, primary(test))
	}
	for _, name := range extra {
		for _, mt := range allMetrics(test) {
			if mt.Name == name && !hasMetric(mts, name) {
				mts = append(mts, mt)
			}
		}
	}
	return mts
}

// anyValues reports whether some arm of some model has values for the
// metric in group g.
func anyValues(models []*Model, g group, name string) bool {
	for _, m := range models {
		for _, arm := range m.Arms {
			if c := m.cells[cellKey{arm, g.Test, g.Size, name}]; c != nil && len(c.Values) > 0 {
				return true
			}
		}
	}
	return false
}

func allKind(models []*Model, kind string) bool {
	for _, m := range models {
		if m.Run == nil || m.Run.Kind != kind {
			return false
		}
	}
	return len(models) > 0
}

func hasMetric(mts []metric, name string) bool {
	for _, mt := range mts {
		if mt.Name == name {
			return true
		}
	}
	return false
}

func (m *Model) analyzeCell(arm string, g group, mt metric, samples []store.Sample) *Cell {
	c := &Cell{Arm: arm, Test: g.Test, Size: g.Size, Metric: mt.Name, Unit: mt.Unit, HigherIsBetter: mt.HigherIsBetter}
	reasons := map[string]bool{}
	var firstErr string
	var steal []float64
	var vals []sampleOf
	for _, s := range samples {
		if s.Result == nil {
			c.Failed++
			if firstErr == "" {
				firstErr = s.Error
			}
			continue
		}
		if v, ok := mt.Get(s.Result); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			vals = append(vals, sampleOf{v, s.Seq, s.Result})
		} else {
			reasons[missingReason(s.Result, mt)] = true
		}
		if st, ok := stealOf(s.Result); ok {
			steal = append(steal, st)
		}
	}
	for _, v := range vals {
		c.Values = append(c.Values, v.v)
	}
	if len(c.Values) == 0 {
		switch {
		case len(samples) == 0 && !m.Run.Complete:
			c.Missing = "not measured: the run stopped before this arm was measured"
		case len(samples) == 0:
			c.Missing = "not measured: no sample of this arm for this test and size"
		case c.Failed == len(samples):
			c.Missing = fmt.Sprintf("all %d samples failed: %s", c.Failed, firstErr)
		default:
			c.Missing = joinSorted(reasons)
		}
		return c
	}
	c.Summary = stats.Summarize(c.Values)
	if c.Modes = findModes(vals); c.Modes != nil {
		c.Flags = append(c.Flags, FlagModes)
	}
	if c.Summary.CV > NoisyCV {
		c.Flags = append(c.Flags, "noisy")
	}
	if len(steal) > 0 && stats.Mean(steal) > StealPct {
		c.Flags = append(c.Flags, "steal")
	}
	c.Flags = append(c.Flags, cellConditionFlags(g.Test, mt.Name == primary(g.Test).Name, c.Summary.Median, samples)...)
	if c.Failed > 0 {
		c.Flags = append(c.Flags, fmt.Sprintf("%d failed", c.Failed))
	}
	// CDF of the sample closest to the median: one real distribution,
	// not an average of distributions.
	best := math.Inf(1)
	for _, v := range vals {
		if d := math.Abs(v.v - c.Summary.Median); d < best && v.r.Latency != nil && len(v.r.Latency.CDF) > 0 {
			best, c.CDF = d, v.r.Latency.CDF
		}
	}
	return c
}

// missingReason explains why r lacks mt: the result's own reason when it
// gave one, otherwise which tool did not report it.
func missingReason(r *result.Result, mt metric) string {
	for _, p := range mt.missingPaths {
		if why, ok := r.Missing[p]; ok {
			return why
		}
	}
	// A reason recorded for a sub-field (e.g. cpu.server.process_pct when
	// the metric reads cpu.server) also explains it.
	for _, p := range mt.missingPaths {
		for _, k := range r.MissingPaths() {
			if strings.HasPrefix(k, p+".") {
				return r.Missing[k]
			}
		}
	}
	tool := r.Tool.Name
	if tool == "" {
		tool = "the engine"
	}
	return fmt.Sprintf("%s did not report %s", tool, mt.Label)
}

func joinSorted(set map[string]bool) string {
	var s []string
	for k := range set {
		s = append(s, k)
	}
	sort.Strings(s)
	return strings.Join(s, "; ")
}

// stealOf is the larger of the two sides' steal time in one result.
func stealOf(r *result.Result) (float64, bool) {
	if r.CPU == nil {
		return 0, false
	}
	v, ok := math.Inf(-1), false
	for _, side := range []*result.CPUSide{r.CPU.Client, r.CPU.Server} {
		if side != nil && side.StealPct != nil {
			v, ok = math.Max(v, *side.StealPct), true
		}
	}
	return v, ok
}

func (m *Model) buildColumns() { m.Columns = columnsFor([]*Model{m}) }

// columnsFor returns the table columns covering every model: the union of
// their (test, size) groups, in report order, with the metrics of the
// common shape (throughput only when every model has that shape).
func columnsFor(models []*Model) []Column {
	shape := ShapeThroughput
	gset := map[group]bool{}
	tests := map[string]bool{}
	sizes := map[int]bool{}
	for _, m := range models {
		if m.Shape != ShapeThroughput {
			shape = ShapeLatency
		}
		for _, g := range m.Groups {
			gset[g] = true
			tests[g.Test] = true
			sizes[g.Size] = true
		}
	}
	var groups []group
	for g := range gset {
		groups = append(groups, g)
	}
	sortGroups(groups)
	var cols []Column
	for _, g := range groups {
		var extra []string
		for _, m := range models {
			for _, e := range extraMetrics(m.Run) {
				if !contains(extra, e) {
					extra = append(extra, e)
				}
			}
		}
		mts := tableMetricsFor(shape, g.Test, extra)
		// A userspace datapath's CPU goes beside the engine's wherever an
		// arm measured one: its cost is not in the engine's figures.
		if !hasMetric(mts, mDatapathCPU.Name) && anyValues(models, g, mDatapathCPU.Name) {
			mt := mDatapathCPU
			if allKind(models, store.KindK8s) {
				// k8s run --agent-cpu: the nodes' agents, not a lab's daemon.
				mt.Label = "datapath agents CPU"
			}
			mts = append(mts, mt)
		}
		for _, mt := range mts {
			col := Column{Test: g.Test, Size: g.Size, metric: mt, Unit: displayUnit(mt.Unit), Scale: 1}
			if mt.Unit == "Mb/s" {
				var max float64
				for _, m := range models {
					for _, arm := range m.Arms {
						if c := m.cells[cellKey{arm, g.Test, g.Size, mt.Name}]; c != nil && len(c.Values) > 0 {
							max = math.Max(max, c.Summary.Median)
						}
					}
				}
				if max >= 1000 {
					col.Unit, col.Scale = "Gb/s", 1e-3
				}
			}
			var parts []string
			if shape == ShapeLatency || len(tests) > 1 {
				parts = append(parts, g.Test)
			}
			if len(sizes) > 1 {
				parts = append(parts, FormatSize(g.Size))
			}
			if shape == ShapeThroughput || mt.Name != primary(g.Test).Name {
				parts = append(parts, mt.Label)
			}
			col.Header = fmt.Sprintf("%s (%s)", strings.Join(parts, " "), col.Unit)
			cols = append(cols, col)
		}
	}
	return cols
}

func sortGroups(gs []group) {
	sort.Slice(gs, func(i, j int) bool {
		a, b := gs[i], gs[j]
		if a.Test != b.Test {
			return testOrder(a.Test) < testOrder(b.Test)
		}
		return a.Size < b.Size
	})
}

func displayUnit(u string) string {
	switch u {
	case "us":
		return "µs"
	case "/s":
		return "txn/s"
	}
	return u
}

// FormatSize prints a message size the way qperf's msg_size option takes
// it: 1B, 1K, 4K, 64K, 1M.
func FormatSize(n int) string {
	s := units.FormatSize(n)
	if n < 1<<10 || n%(1<<10) != 0 {
		s += "B" // a bare number reads as a count in a table; say it is bytes
	}
	return s
}

// runFlags are the warnings about the environment of a whole run.
func runFlags(run *store.Run, ss []store.Sample, m *Model) []Flag {
	var flags []Flag
	if !run.Complete {
		msg := "the run is incomplete"
		if run.Status != "" {
			msg += ": " + run.Status
		}
		flags = append(flags, Flag{"incomplete", msg})
	}
	if run.Baseline != "" && m.Baseline == "" {
		flags = append(flags, Flag{"no-baseline", fmt.Sprintf("the baseline arm %q has no samples: no ratios or verdicts against it", run.Baseline)})
	}
	// Governors of the run's host and of every endpoint that reported one.
	govs := map[string][]string{} // governor -> hosts
	add := func(fp *result.Fingerprint, who string) {
		if fp == nil {
			return
		}
		if fp.Hostname != "" {
			who = fp.Hostname
		}
		for _, h := range govs[fp.Governor] {
			if h == who {
				return
			}
		}
		govs[fp.Governor] = append(govs[fp.Governor], who)
	}
	add(&run.Host, "the run's host")
	for _, s := range ss {
		if s.Result != nil {
			add(s.Result.Env.Client, "a client host")
			add(s.Result.Env.Server, "a server host")
		}
	}
	var names []string
	for g := range govs {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		hosts := hostList(govs[g])
		switch g {
		case "performance":
		case "":
			flags = append(flags, Flag{"no-cpufreq", "no CPU frequency governor reported on " + hosts +
				" (no cpufreq, e.g. a VM): frequency scaling is unknown"})
		case "powersave":
			flags = append(flags, Flag{"powersave", "CPU governor is powersave on " + hosts +
				": latency is higher and unstable (cpupower frequency-set -g performance)"})
		default:
			flags = append(flags, Flag{"frequency-scaling", fmt.Sprintf("CPU governor is %s on %s: the frequency changes with load", g, hosts)})
		}
	}
	var noisy, steal int
	for _, col := range m.Columns {
		for _, arm := range m.Arms {
			c := m.cell(arm, col)
			if c == nil {
				continue
			}
			for _, f := range c.Flags {
				switch f {
				case "noisy":
					noisy++
				case "steal":
					steal++
				}
			}
		}
	}
	if steal > 0 {
		flags = append(flags, Flag{"steal", fmt.Sprintf("%s measured with steal time > %.0f%%: another VM took CPU during the measurement", cells(steal), StealPct)})
	}
	if noisy > 0 {
		flags = append(flags, Flag{"noisy", fmt.Sprintf("%s with a coefficient of variation > %.0f%%: repeat with longer tests or on a quieter host", cells(noisy), NoisyCV*100)})
	}
	return flags
}

func cells(n int) string {
	if n == 1 {
		return "1 table cell"
	}
	return fmt.Sprintf("%d table cells", n)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// MedianCV is the median coefficient of variation over the table's cells
// with at least two values, and how many cells that is: one figure for
// "how noisy was this run" (issue 4's target for the default experiment is
// ≤ 5%). NaN when no cell has two values.
func (m *Model) MedianCV() (float64, int) {
	var cvs []float64
	for _, col := range m.Columns {
		for _, arm := range m.Arms {
			if c := m.cell(arm, col); c != nil && c.Summary.N >= 2 && !math.IsNaN(c.Summary.CV) {
				cvs = append(cvs, c.Summary.CV)
			}
		}
	}
	return stats.Median(cvs), len(cvs)
}

// hostList names up to four hosts and counts the rest, so a Kubernetes run
// with a pod per scenario and repeat does not print a paragraph of names.
func hostList(hosts []string) string {
	const show = 4
	if len(hosts) <= show {
		return strings.Join(hosts, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(hosts[:show], ", "), len(hosts)-show)
}
