package sockperf

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/drivertest"
	"github.com/cnibench/cnibench/pkg/driver"
)

var golden = drivertest.Goldens{Driver: Driver, Port: 11120, Rel: 1e-6}

func TestParseFullRTT(t *testing.T) {
	r := golden.Parse(t, "udp_lat", 14, "udp_m14_fullrtt.txt")
	l := r.Latency
	golden.Near(t, "rtt mean", l.RTTNs.Mean, 26179)
	golden.Near(t, "rtt stddev", l.RTTNs.Stddev, 314686)
	golden.Near(t, "rtt p50", l.RTTNs.P50, 13515)
	golden.Near(t, "rtt p90", l.RTTNs.P90, 14837)
	golden.Near(t, "rtt p99", l.RTTNs.P99, 106569)
	golden.Near(t, "rtt p99.9", l.RTTNs.P999, 2212876)
	golden.Near(t, "rtt min", l.RTTNs.Min, 13244)
	golden.Near(t, "rtt max", l.RTTNs.Max, 34723962)
	golden.Near(t, "one-way mean", l.OneWayNs.Mean, 26179.0/2)
	golden.Near(t, "one-way p50", l.OneWayNs.P50, 13515.0/2)
	if l.RTTNs.Count != 20998 || r.Transactions.Count != 20998 {
		t.Fatalf("count %d / %d", l.RTTNs.Count, r.Transactions.Count)
	}
	if math.Abs(r.Transactions.PerSec-20998/0.550) > 1e-6 || r.DurationSeconds != 0.55 || r.WarmupSeconds != 0.4 {
		t.Fatalf("per sec %v duration %v warmup %v", r.Transactions.PerSec, r.DurationSeconds, r.WarmupSeconds)
	}
	if len(l.CDF) != 10 || l.CDF[0].Percentile != 0 || l.CDF[9].Percentile != 100 {
		t.Fatalf("cdf %+v", l.CDF)
	}
	for i := 1; i < len(l.CDF); i++ {
		if l.CDF[i].Percentile <= l.CDF[i-1].Percentile || l.CDF[i].Ns < l.CDF[i-1].Ns {
			t.Fatalf("cdf not monotonic at %d: %+v", i, l.CDF)
		}
	}
	if r.UDP == nil || r.UDP.Sent != 20998 || r.UDP.Lost != 0 || r.Missing["udp.jitter_ns"] == "" {
		t.Fatalf("udp %+v", r.UDP)
	}
	if r.CPU != nil || r.Missing["cpu"] == "" {
		t.Fatal("cpu must be missing with a reason")
	}
	if strings.Join(r.Tool.Command, " ") != "sockperf ping-pong -i 127.0.0.1 -p 11120 -m 14 -t 1 --full-rtt" {
		t.Fatalf("command %q", r.Tool.Command)
	}
}

func TestParseTCP(t *testing.T) {
	r := golden.Parse(t, "tcp_lat", 1024, "tcp_m1024_fullrtt.txt")
	golden.Near(t, "tcp rtt p50", r.Latency.RTTNs.P50, 27000)
	if r.UDP != nil {
		t.Fatal("tcp_lat has no UDP accounting")
	}
}

func TestParseOneWayOutput(t *testing.T) {
	// Without --full-rtt sockperf prints one-way (RTT/2) figures.
	r := golden.Parse(t, "udp_lat", 64, "udp_m64_oneway.txt")
	golden.Near(t, "one-way mean", r.Latency.OneWayNs.Mean, 23897)
	golden.Near(t, "rtt mean", r.Latency.RTTNs.Mean, 2*23897)
	golden.Near(t, "one-way p50", r.Latency.OneWayNs.P50, 6797)
}

func TestParseMissingPercentile(t *testing.T) {
	r := golden.Parse(t, "udp_lat", 14, "edited_no_p99_9.txt")
	if r.Latency.RTTNs.P999 != nil || r.Missing["latency.rtt_ns.p99_9"] == "" {
		t.Fatal("absent percentile must be nil with a reason")
	}
}

func TestParseErrors(t *testing.T) {
	golden.ParseErrors(t, []drivertest.ParseError{
		{File: "err_msg_size_1.txt", Test: "udp_lat", Size: 14, Want: "Invalid message size: 1"},
		{File: "err_tcp_refused.txt", Test: "udp_lat", Size: 14, Want: "Can`t connect socket (errno=111 Connection refused)"},
		{File: "err_udp_no_server.txt", Test: "udp_lat", Size: 14, Want: "No messages were received from the server"},
	})
	golden.Unparsable(t, golden.Spec("udp_lat", 14), "")
}

func TestCommands(t *testing.T) {
	d := Driver
	if _, err := d.ClientCommand(golden.Spec("udp_lat", 1)); err == nil || !strings.Contains(err.Error(), "smallest message is 14 bytes") {
		t.Fatalf("size 1: %v", err)
	}
	s := golden.Spec("tcp_lat", 64)
	s.Parallel = 2
	if _, err := d.ClientCommand(s); err == nil {
		t.Fatal("parallel accepted")
	}
	argv, err := d.ClientCommand(golden.Spec("tcp_lat", 64))
	if err != nil || strings.Join(argv, " ") != "sockperf ping-pong -i 127.0.0.1 -p 11120 --tcp -m 64 -t 1 --full-rtt" {
		t.Fatalf("argv %q %v", argv, err)
	}
	argv, _ = d.ServerCommand(golden.Spec("tcp_lat", 64))
	if strings.Join(argv, " ") != "sockperf server --tcp -p 11120" {
		t.Fatalf("server %q", argv)
	}
	argv, _ = d.ServerCommand(golden.Spec("udp_lat", 64))
	if strings.Join(argv, " ") != "sockperf server -p 11120" {
		t.Fatalf("server %q", argv)
	}
	for _, test := range []string{"tcp_bw", "udp_bw", "tcp_crr"} {
		if d.Supports(test) == nil {
			t.Fatalf("%s accepted", test)
		}
	}
}

// sockperf's own bounds (14 bytes up to 1 MiB - 1) and a UDP datagram's.
func TestCommandSizeLimits(t *testing.T) {
	golden.SizeLimits(t, "tcp_lat", map[int]bool{13: false, 14: true, 1<<20 - 1: true, 1 << 20: false})
	golden.SizeLimits(t, "udp_lat", map[int]bool{65507: true, 65508: false})
}

// FuzzParseReport: sockperf's text output, however truncated or garbled,
// parses into finite, non-negative figures or is refused.
func FuzzParseReport(f *testing.F) {
	drivertest.FuzzParse(f, "testdata/*.txt", ParseReport, func(t *testing.T, r *Report) {
		for name, v := range map[string]float64{"avg": r.Avg, "stddev": r.StdDev, "valid_seconds": r.ValidSeconds, "warmup_ms": r.WarmupMs} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("%s parsed as %v", name, v)
			}
		}
		if r.ValidSent < 0 || r.ValidReceived < 0 || r.Dropped < 0 {
			t.Fatalf("negative counts: %+v", r)
		}
	})
}

// TestPrivEndToEnd runs real sockperf across a veth pair (privileged).
func TestPrivEndToEnd(t *testing.T) {
	rs := drivertest.Run(t, Driver, 11190,
		driver.Spec{Test: "tcp_lat", MsgSize: 64, Duration: time.Second},
		driver.Spec{Test: "udp_lat", MsgSize: 64, Duration: time.Second},
	)
	for _, r := range rs {
		drivertest.CheckCommon(t, r)
		drivertest.CheckLatency(t, r)
		if r.Latency.RTTNs.P99 == nil || *r.Latency.RTTNs.P99 < *r.Latency.RTTNs.P50 {
			t.Errorf("%s: percentiles %+v", r.Test, r.Latency.RTTNs)
		}
	}
}
