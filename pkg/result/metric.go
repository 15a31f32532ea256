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

func deref(p *float64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

// Metrics known to reports, keyed by Name.
var Metrics = map[string]Metric{
	"one_way_mean_us": {Name: "one_way_mean_us", Unit: "us", Get: func(r *Result) (float64, bool) {
		if r.Latency == nil {
			return 0, false
		}
		v, ok := deref(r.Latency.OneWayNs.Mean)
		return v / 1e3, ok
	}},
	"rtt_p50_us": {Name: "rtt_p50_us", Unit: "us", Get: func(r *Result) (float64, bool) {
		if r.Latency == nil {
			return 0, false
		}
		v, ok := deref(r.Latency.RTTNs.P50)
		return v / 1e3, ok
	}},
	"rtt_p99_us": {Name: "rtt_p99_us", Unit: "us", Get: func(r *Result) (float64, bool) {
		if r.Latency == nil {
			return 0, false
		}
		v, ok := deref(r.Latency.RTTNs.P99)
		return v / 1e3, ok
	}},
	"transactions_per_sec": {Name: "transactions_per_sec", Unit: "/s", HigherIsBetter: true, Get: func(r *Result) (float64, bool) {
		if r.Transactions == nil {
			return 0, false
		}
		return r.Transactions.PerSec, true
	}},
	"receiver_mbps": {Name: "receiver_mbps", Unit: "Mb/s", HigherIsBetter: true, Get: func(r *Result) (float64, bool) {
		if r.Throughput == nil {
			return 0, false
		}
		v, ok := deref(r.Throughput.ReceiverBps)
		return v / 1e6, ok
	}},
	"sender_mbps": {Name: "sender_mbps", Unit: "Mb/s", HigherIsBetter: true, Get: func(r *Result) (float64, bool) {
		if r.Throughput == nil {
			return 0, false
		}
		v, ok := deref(r.Throughput.SenderBps)
		return v / 1e6, ok
	}},
	"receiver_kpps": {Name: "receiver_kpps", Unit: "kpps", HigherIsBetter: true, Get: func(r *Result) (float64, bool) {
		if r.Throughput == nil {
			return 0, false
		}
		v, ok := deref(r.Throughput.ReceiverPps)
		return v / 1e3, ok
	}},
	"udp_loss_pct": {Name: "udp_loss_pct", Unit: "%", Get: func(r *Result) (float64, bool) {
		if r.UDP == nil {
			return 0, false
		}
		return r.UDP.LossPct, true
	}},
	"client_cpu_pct": {Name: "client_cpu_pct", Unit: "%", Get: func(r *Result) (float64, bool) {
		if r.CPU == nil || r.CPU.Client == nil {
			return 0, false
		}
		return deref(r.CPU.Client.ProcessPct)
	}},
	"server_cpu_pct": {Name: "server_cpu_pct", Unit: "%", Get: func(r *Result) (float64, bool) {
		if r.CPU == nil || r.CPU.Server == nil {
			return 0, false
		}
		return deref(r.CPU.Server.ProcessPct)
	}},
	"server_cpu_s_per_gb": {Name: "server_cpu_s_per_gb", Unit: "CPU-s/GB", Get: func(r *Result) (float64, bool) {
		if r.CPU == nil || r.CPU.Server == nil {
			return 0, false
		}
		return deref(r.CPU.Server.SecondsPerGB)
	}},
	"datapath_cpu_pct": {Name: "datapath_cpu_pct", Unit: "%", Get: func(r *Result) (float64, bool) {
		if r.CPU == nil || r.CPU.Datapath == nil {
			return 0, false
		}
		return deref(r.CPU.Datapath.Pct)
	}},
	"datapath_cpu_us_per_txn": {Name: "datapath_cpu_us_per_txn", Unit: "CPU-us/txn", Get: func(r *Result) (float64, bool) {
		if r.CPU == nil || r.CPU.Datapath == nil {
			return 0, false
		}
		return deref(r.CPU.Datapath.UsPerTransaction)
	}},
	"datapath_cpu_s_per_gb": {Name: "datapath_cpu_s_per_gb", Unit: "CPU-s/GB", Get: func(r *Result) (float64, bool) {
		if r.CPU == nil || r.CPU.Datapath == nil {
			return 0, false
		}
		return deref(r.CPU.Datapath.SecondsPerGB)
	}},
	"pmd_busy_pct": {Name: "pmd_busy_pct", Unit: "%", Get: func(r *Result) (float64, bool) {
		if r.CPU == nil || r.CPU.Datapath == nil {
			return 0, false
		}
		return deref(r.CPU.Datapath.PMDBusyPct)
	}},
	"client_cpu_us_per_txn": {Name: "client_cpu_us_per_txn", Unit: "CPU-us/txn", Get: func(r *Result) (float64, bool) {
		if r.CPU == nil || r.CPU.Client == nil {
			return 0, false
		}
		return deref(r.CPU.Client.UsPerTransaction)
	}},
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
