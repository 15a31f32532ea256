package qperf

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/drivertest"
	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/result"
)

var golden = drivertest.Goldens{Driver: Driver, Port: 19770, Rel: 1e-9}

func TestParseLatencyGolden(t *testing.T) {
	r := golden.Parse(t, "tcp_lat", 1, "driver_tcp_lat_1.txt")
	golden.Near(t, "one-way mean", r.Latency.OneWayNs.Mean, 12900)
	golden.Near(t, "rtt mean", r.Latency.RTTNs.Mean, 25800)
	if r.Latency.RTTNs.P99 != nil || r.Missing["latency.rtt_ns.p99"] == "" {
		t.Fatalf("p99 must be nil with a reason, got %v / %q", r.Latency.RTTNs.P99, r.Missing["latency.rtt_ns.p99"])
	}
	if r.Transactions == nil || r.Transactions.Count != 38678 || r.Transactions.PerSec != 38678 {
		t.Fatalf("transactions = %+v, want 38678 in 1 s", r.Transactions)
	}
	golden.Near(t, "client host busy", r.CPU.Client.HostBusyPct, 200)
	golden.Near(t, "server host busy", r.CPU.Server.HostBusyPct, 200)
	if r.CPU.Client.ProcessSeconds != nil || r.Missing["cpu.client.process_seconds"] == "" {
		t.Fatal("qperf's CPU is host-wide; process_seconds must stay nil with a reason")
	}
	want := []string{"qperf", "-t", "1", "127.0.0.1", "-lp", "19770", "-ub", "-oo", "msg_size:1", "-vu", "-vt", "-vvs", "tcp_lat"}
	if !reflect.DeepEqual(r.Tool.Command, want) {
		t.Fatalf("command = %q, want %q", r.Tool.Command, want)
	}
	if r.DurationSeconds != 1 || r.MsgSizeBytes != 1 || r.Test != "tcp_lat" {
		t.Fatalf("duration/size/test = %v/%v/%v", r.DurationSeconds, r.MsgSizeBytes, r.Test)
	}

	r = golden.Parse(t, "tcp_lat", 4096, "driver_tcp_lat_4096.txt")
	golden.Near(t, "4K one-way", r.Latency.OneWayNs.Mean, 13800)
	if r.MsgSizeBytes != 4096 {
		t.Fatalf("msg size %d, want 4096 from \"4 KiB (4,096)\"", r.MsgSizeBytes)
	}
}

func TestParseBandwidthGolden(t *testing.T) {
	r := golden.Parse(t, "tcp_bw", 4096, "driver_tcp_bw_4096.txt")
	golden.Near(t, "receiver bps", r.Throughput.ReceiverBps, 7.15e9)
	if r.Throughput.SenderBps != nil || r.Missing["throughput.sender_bps"] == "" {
		t.Fatal("tcp_bw sender_bps must be nil with a reason")
	}
	if *r.Throughput.BytesSent != 893e6 || *r.Throughput.BytesReceived != 893e6 {
		t.Fatalf("bytes = %d/%d", *r.Throughput.BytesSent, *r.Throughput.BytesReceived)
	}
	golden.Near(t, "receiver pps", r.Throughput.ReceiverPps, 218097)

	r = golden.Parse(t, "udp_bw", 1, "driver_udp_bw_1.txt")
	golden.Near(t, "udp sender bps", r.Throughput.SenderBps, 908e3)
	golden.Near(t, "udp receiver bps", r.Throughput.ReceiverBps, 576e3)
	if r.UDP.Sent != 113514 || r.UDP.Received != 71976 || r.UDP.Lost != 113514-71976 {
		t.Fatalf("udp = %+v", r.UDP)
	}
	if math.Abs(r.UDP.LossPct-100*float64(113514-71976)/113514) > 1e-9 {
		t.Fatalf("loss pct %v", r.UDP.LossPct)
	}
	if r.UDP.JitterNs != nil || r.Missing["udp.jitter_ns"] == "" {
		t.Fatal("jitter must be nil with a reason")
	}
	golden.Near(t, "sender host busy", r.CPU.Client.HostBusyPct, 201)
}

func TestParseSeedCommandOutput(t *testing.T) {
	// The seeds' own command prints four tests and only -vu fields.
	out := drivertest.Golden(t, "seed_msg1_4tests.txt")
	want := map[string]float64{"tcp_lat": 12000, "udp_lat": 9290}
	for test, ns := range want {
		r := golden.ParseOut(t, golden.Spec(test, 1), out)
		golden.Near(t, test, r.Latency.OneWayNs.Mean, ns)
		if r.Transactions != nil || r.CPU != nil || r.Missing["cpu"] == "" || r.Missing["transactions"] == "" {
			t.Fatalf("%s: transactions/cpu must be missing with reasons: %+v %v", test, r.Transactions, r.Missing)
		}
	}
	r := golden.ParseOut(t, golden.Spec("udp_bw", 1), out)
	golden.Near(t, "udp send", r.Throughput.SenderBps, 598e3)
	golden.Near(t, "udp recv", r.Throughput.ReceiverBps, 260e3)
	if r.UDP != nil || r.Missing["udp"] == "" {
		t.Fatal("without -vvs, udp counts are missing with a reason")
	}
}

func TestParseLoopOutput(t *testing.T) {
	out := drivertest.Golden(t, "loop_msg_size_1_to_4K.txt")
	for size, ns := range map[int]float64{1: 8670, 8: 14400, 512: 10300, 4096: 9210} {
		r := golden.ParseOut(t, golden.Spec("tcp_lat", size), out)
		golden.Near(t, "loop latency", r.Latency.OneWayNs.Mean, ns)
	}
	if _, err := Driver.Parse(golden.Spec("tcp_lat", 1024), out); err == nil || !strings.Contains(err.Error(), "none at msg_size 1024") {
		t.Fatalf("size not in loop: %v", err)
	}
}

func TestParseUnits(t *testing.T) {
	out := drivertest.Golden(t, "edited_units.txt")
	cases := []struct {
		test string
		get  func(*result.Result) *float64
		want float64
	}{
		{"tcp_lat", func(r *result.Result) *float64 { return r.Latency.OneWayNs.Mean }, 1.2e6},
		{"udp_lat", func(r *result.Result) *float64 { return r.Latency.OneWayNs.Mean }, 9290},
		{"tcp_bw", func(r *result.Result) *float64 { return r.Throughput.ReceiverBps }, 3.1e9},
		{"udp_bw", func(r *result.Result) *float64 { return r.Throughput.ReceiverBps }, 260e3 * 8},
	}
	for _, c := range cases {
		r := golden.ParseOut(t, golden.Spec(c.test, 1), out)
		golden.Near(t, c.test, c.get(r), c.want)
	}
	// Bytes per second, captured without -ub.
	r := golden.Parse(t, "tcp_bw", 65536, "bytes_units_65536.txt")
	golden.Near(t, "GB/sec", r.Throughput.ReceiverBps, 2.49e9*8)
}

func TestParseErrors(t *testing.T) {
	golden.ParseErrors(t, []drivertest.ParseError{
		{File: "edited_bad_unit.txt", Test: "tcp_lat", Size: 1, Want: `unknown unit "fortnights"`},
		{File: "edited_bad_value.txt", Test: "udp_lat", Size: 1, Want: "does not start with a number"},
		{File: "seed_msg1_4tests.txt", Test: "tcp_crr", Size: 1, Want: "no tcp_crr block"},
		{File: "driver_tcp_lat_1.txt", Test: "tcp_lat", Size: 64, Want: "msg_size 1 bytes, 64 was asked"},
		// Real output: 64 KiB datagrams cannot be sent; qperf prints 0.
		{File: "bytes_units_65536.txt", Test: "udp_bw", Size: 65536, Want: "sent nothing"},
	})
	// An unknown line must be an error.
	golden.Unparsable(t, golden.Spec("tcp_lat", 1), "qperf: failed to connect\n")
	if _, err := Driver.Parse(golden.Spec("tcp_lat", 1), nil); err == nil || !strings.Contains(err.Error(), "no results") {
		t.Errorf("empty output: %v", err)
	}
}

func TestCommands(t *testing.T) {
	d := Driver
	if err := d.Supports("tcp_crr"); err == nil || err.Error() != "qperf has no tcp_crr test; use engine builtin" {
		t.Fatalf("tcp_crr: %v", err)
	}
	s := golden.Spec("udp_bw", 1)
	s.Parallel = 4
	if _, err := d.ClientCommand(s); err == nil || !strings.Contains(err.Error(), "one stream") {
		t.Fatalf("parallel: %v", err)
	}
	s = golden.Spec("udp_bw", 1)
	s.RateBps = 1e6
	if _, err := d.ClientCommand(s); err == nil || !strings.Contains(err.Error(), "rate") {
		t.Fatalf("rate: %v", err)
	}
	s = golden.Spec("udp_bw", 65536)
	if _, err := d.ClientCommand(s); err == nil || !strings.Contains(err.Error(), "UDP datagram") {
		t.Fatalf("udp size: %v", err)
	}
	s = golden.Spec("tcp_lat", 1)
	s.Duration = 1500 * time.Millisecond
	if _, err := d.ClientCommand(s); err == nil || !strings.Contains(err.Error(), "whole seconds") {
		t.Fatalf("fractional duration: %v", err)
	}
	argv, err := d.ServerCommand(driver.Spec{Port: 4000})
	if err != nil || !reflect.DeepEqual(argv, []string{"qperf", "--listen_port", "4000"}) {
		t.Fatalf("server: %q %v", argv, err)
	}
	argv, _ = d.ServerCommand(driver.Spec{})
	if !reflect.DeepEqual(argv, []string{"qperf"}) {
		t.Fatalf("server default: %q", argv)
	}
	if _, err := driver.Lookup("qperf"); err != nil {
		t.Fatal(err)
	}
}

// qperf prints large counts rounded ("2.13 million"): they parse, but loss
// derived from two rounded counts would be noise, so it is reported missing.
func TestParseRoundedCounts(t *testing.T) {
	r := golden.Parse(t, "udp_bw", 1, "edited_million_counts.txt")
	golden.Near(t, "sender pps", r.Throughput.SenderPps, 2.13e6/r.DurationSeconds)
	if r.UDP != nil || !strings.Contains(r.Missing["udp"], "rounded counts") {
		t.Fatalf("loss from rounded counts: udp=%+v missing=%q", r.UDP, r.Missing["udp"])
	}
}

// FuzzParseBlocks: any output qperf (or a broken pipe) can produce parses or
// is refused; a parsed number is never NaN or infinite, so a garbled line
// cannot become a measured value.
func FuzzParseBlocks(f *testing.F) {
	drivertest.FuzzParse(f, "testdata/*.txt", ParseBlocks, func(t *testing.T, blocks []Block) {
		for _, b := range blocks {
			for name, fl := range b.Fields {
				if math.IsNaN(fl.Value) || math.IsInf(fl.Value, 0) {
					t.Fatalf("%s.%s parsed as %v", b.Test, name, fl.Value)
				}
			}
		}
	})
}

// TestPrivEndToEnd runs real qperf across a veth pair (privileged).
func TestPrivEndToEnd(t *testing.T) {
	var specs []driver.Spec
	for _, test := range []string{"tcp_lat", "udp_lat", "tcp_bw", "udp_bw"} {
		specs = append(specs, driver.Spec{Test: test, MsgSize: 1024, Duration: time.Second})
	}
	rs := drivertest.Run(t, Driver, 19790, specs...)
	for _, r := range rs {
		drivertest.CheckCommon(t, r)
		if r.Test == "tcp_lat" || r.Test == "udp_lat" {
			drivertest.CheckLatency(t, r)
		} else {
			drivertest.CheckBandwidth(t, r)
		}
	}
}
