package result

// Metric is a scalar the statistics and reports can pull out of a Result.
type Metric struct {
	Name string // stable id, e.g. "one_way_mean_us"
	// Label and Unit are for table headers, e.g. "tcp_lat", "us".
	Unit string
	// HigherIsBetter decides the direction of "× baseline" and verdicts.
	HigherIsBetter bool
	// Get returns the value, or false if the result has none.
	Get func(*Result) (float64, bool)
}

// Metrics known to reports, keyed by Name.
var Metrics = byName(
	Metric{Name: "one_way_mean_us", Unit: "us", Get: get(latency, func(l *Latency) *float64 { return l.OneWayNs.Mean }, 1e3)},
	Metric{Name: "rtt_p50_us", Unit: "us", Get: get(latency, func(l *Latency) *float64 { return l.RTTNs.P50 }, 1e3)},
	Metric{Name: "rtt_p99_us", Unit: "us", Get: get(latency, func(l *Latency) *float64 { return l.RTTNs.P99 }, 1e3)},
	Metric{Name: "transactions_per_sec", Unit: "/s", HigherIsBetter: true, Get: get(transactions, func(t *Transactions) *float64 { return &t.PerSec }, 1)},
	Metric{Name: "receiver_mbps", Unit: "Mb/s", HigherIsBetter: true, Get: get(throughput, func(t *Throughput) *float64 { return t.ReceiverBps }, 1e6)},
	Metric{Name: "sender_mbps", Unit: "Mb/s", HigherIsBetter: true, Get: get(throughput, func(t *Throughput) *float64 { return t.SenderBps }, 1e6)},
	Metric{Name: "receiver_kpps", Unit: "kpps", HigherIsBetter: true, Get: get(throughput, func(t *Throughput) *float64 { return t.ReceiverPps }, 1e3)},
	Metric{Name: "udp_loss_pct", Unit: "%", Get: get(udp, func(u *UDP) *float64 { return &u.LossPct }, 1)},
	Metric{Name: "client_cpu_pct", Unit: "%", Get: get(clientCPU, func(c *CPUSide) *float64 { return c.ProcessPct }, 1)},
	Metric{Name: "client_cpu_us_per_txn", Unit: "CPU-us/txn", Get: get(clientCPU, func(c *CPUSide) *float64 { return c.UsPerTransaction }, 1)},
	Metric{Name: "server_cpu_pct", Unit: "%", Get: get(serverCPU, func(c *CPUSide) *float64 { return c.ProcessPct }, 1)},
	Metric{Name: "server_cpu_s_per_gb", Unit: "CPU-s/GB", Get: get(serverCPU, func(c *CPUSide) *float64 { return c.SecondsPerGB }, 1)},
	Metric{Name: "datapath_cpu_pct", Unit: "%", Get: get(datapathCPU, func(d *DatapathCPU) *float64 { return d.Pct }, 1)},
	Metric{Name: "datapath_cpu_us_per_txn", Unit: "CPU-us/txn", Get: get(datapathCPU, func(d *DatapathCPU) *float64 { return d.UsPerTransaction }, 1)},
	Metric{Name: "datapath_cpu_s_per_gb", Unit: "CPU-s/GB", Get: get(datapathCPU, func(d *DatapathCPU) *float64 { return d.SecondsPerGB }, 1)},
	Metric{Name: "control_plane_ms", Unit: "ms", Get: get(controlPlane, func(c *ControlPlane) *float64 { return c.LatencyNs }, 1e6)},
	// A disruption event's figures, as pkg/disrupt compares them.
	Metric{Name: "longest_gap_ms", Unit: "ms", Get: get(disruption, func(d *Disruption) *float64 { return &d.LongestGapMs }, 1)},
	Metric{Name: "lost", Unit: "requests", Get: func(r *Result) (float64, bool) {
		if r.Disruption == nil {
			return 0, false
		}
		return float64(r.Disruption.Lost), true
	}},
	Metric{Name: "recover_ms", Unit: "ms", Get: get(disruption, func(d *Disruption) *float64 { return d.RecoverMs }, 1)},
	Metric{Name: "p99_us", Unit: "us", Get: get(disruption, func(d *Disruption) *float64 { return d.P99Us }, 1)},
	Metric{Name: "agent_cpu_ms", Unit: "ms", Get: get(disruption, func(d *Disruption) *float64 { return d.AgentCPUMs }, 1)},
	// A pressure ramp's figures (pkg/pressure).
	Metric{Name: "knee_per_s", Unit: "conn/s", HigherIsBetter: true, Get: get(pressure, func(p *Pressure) *float64 { return p.KneePerS }, 1)},
	Metric{Name: "peak_per_s", Unit: "conn/s", HigherIsBetter: true, Get: get(pressure, func(p *Pressure) *float64 { return &p.PeakPerS }, 1)},
	Metric{Name: "pmd_busy_pct", Unit: "%", Get: get(datapathCPU, func(d *DatapathCPU) *float64 { return d.PMDBusyPct }, 1)},
)

func byName(ms ...Metric) map[string]Metric {
	out := make(map[string]Metric, len(ms))
	for _, m := range ms {
		out[m.Name] = m
	}
	return out
}

// get builds a Metric.Get: the figure field finds in the result's section
// (which section returns, nil when the result has none), divided by div.
// A missing section or a null figure is no value.
func get[S any](section func(*Result) *S, field func(*S) *float64, div float64) func(*Result) (float64, bool) {
	return func(r *Result) (float64, bool) {
		s := section(r)
		if s == nil {
			return 0, false
		}
		p := field(s)
		if p == nil {
			return 0, false
		}
		return *p / div, true
	}
}

// The sections of a Result that metrics read, for get.

func latency(r *Result) *Latency           { return r.Latency }
func throughput(r *Result) *Throughput     { return r.Throughput }
func transactions(r *Result) *Transactions { return r.Transactions }
func udp(r *Result) *UDP                   { return r.UDP }
func controlPlane(r *Result) *ControlPlane { return r.ControlPlane }
func disruption(r *Result) *Disruption     { return r.Disruption }
func pressure(r *Result) *Pressure         { return r.Pressure }

func clientCPU(r *Result) *CPUSide {
	if r.CPU == nil {
		return nil
	}
	return r.CPU.Client
}

func serverCPU(r *Result) *CPUSide {
	if r.CPU == nil {
		return nil
	}
	return r.CPU.Server
}

func datapathCPU(r *Result) *DatapathCPU {
	if r.CPU == nil {
		return nil
	}
	return r.CPU.Datapath
}

// PrimaryMetric is the figure the source documents' tables show for a test:
// one-way latency for the *_lat tests (qperf's convention), transactions/s
// for tcp_crr, receiver throughput for the *_bw tests.
func PrimaryMetric(test string) Metric {
	switch test {
	case TCPLat, UDPLat:
		return Metrics["one_way_mean_us"]
	case TCPCRR:
		return Metrics["transactions_per_sec"]
	default:
		return Metrics["receiver_mbps"]
	}
}
