package report

// The metric catalogue: which figures of a result a report shows for each
// test, their labels, units and where in the result JSON each lives.

import (
	"slices"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/units"
)

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
	// `k8s latency`: the slowest node's, per trial.
	mControlPlane = fromResult("control_plane_ms", "latency", "control_plane.latency_ns", "control_plane")
	mClientCPULat = metric{Metric: mClientCPU.Metric, Label: "client CPU", missingPaths: mClientCPU.missingPaths}
	mServerCPULat = metric{Metric: mServerCPU.Metric, Label: "server CPU", missingPaths: mServerCPU.missingPaths}
	// `disrupt run`: one event as one probe saw it.
	mGap        = fromResult("longest_gap_ms", "longest gap", "disruption.longest_gap_ms", "disruption")
	mLost       = fromResult("lost", "lost", "disruption.lost", "disruption")
	mRecover    = fromResult("recover_ms", "recovery", "disruption.recover_ms", "disruption")
	mEventP99   = fromResult("p99_us", "p99 in the window", "disruption.p99_us", "disruption")
	mAgentCPU   = fromResult("agent_cpu_ms", "agent CPU", "disruption.agent_cpu_ms", "disruption")
	disruptions = []metric{mGap, mLost, mRecover, mEventP99, mAgentCPU}
	// `pressure`: one ramp to its knee.
	mKnee     = fromResult("knee_per_s", "knee (last good)", "pressure.knee_per_s", "pressure")
	mPeak     = fromResult("peak_per_s", "peak", "pressure.peak_per_s", "pressure")
	pressures = []metric{mKnee, mPeak}
)

// ownFigures are the figures of a test that is not a measurement of the
// engine and shows all of them, each named: a disruption event's five, a
// pressure ramp's two; nil for any other test.
func ownFigures(test string) []metric {
	if result.IsDisruptionTest(test) {
		return disruptions
	}
	if _, ok := result.PressureFlows(test); ok {
		return pressures
	}
	return nil
}

// primary is the metric the latency-shape table shows for a test.
func primary(test string) metric {
	if slices.Contains(result.ControlPlaneTests, test) {
		return mControlPlane
	}
	if own := ownFigures(test); own != nil {
		return own[0]
	}
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
	if slices.Contains(result.ControlPlaneTests, test) {
		return []metric{mControlPlane}
	}
	if own := ownFigures(test); own != nil {
		return own
	}
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

func testOrder(t string) int {
	for i, x := range append(result.Tests[:len(result.Tests):len(result.Tests)], result.ControlPlaneTests...) {
		if x == t {
			return i
		}
	}
	return len(result.Tests) + len(result.ControlPlaneTests)
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
	} else if own := ownFigures(test); own != nil {
		// An event's five figures, as `disrupt run` compares them; a
		// ramp's knee and peak.
		mts = append(mts, own...)
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

func hasMetric(mts []metric, name string) bool {
	for _, mt := range mts {
		if mt.Name == name {
			return true
		}
	}
	return false
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
