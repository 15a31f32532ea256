package iperf3

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/drivertest"
	"github.com/cnibench/cnibench/pkg/driver"
)

var golden = drivertest.Goldens{Driver: Driver, Port: 15210, Rel: 1e-9}

func TestParseTCP(t *testing.T) {
	r := golden.Parse(t, "tcp_bw", 0, "tcp_P1.json")
	golden.Near(t, "sender bps", r.Throughput.SenderBps, 18143628122.21987)
	golden.Near(t, "receiver bps", r.Throughput.ReceiverBps, 18075716446.7898)
	if *r.Throughput.BytesSent != 2273968128 || *r.Throughput.BytesReceived != 2273574912 {
		t.Fatalf("bytes %d/%d", *r.Throughput.BytesSent, *r.Throughput.BytesReceived)
	}
	if r.TCP == nil || *r.TCP.Retransmits != 6 {
		t.Fatalf("retransmits %+v", r.TCP)
	}
	golden.Near(t, "client cpu", r.CPU.Client.ProcessPct, 30.693989677562573)
	golden.Near(t, "server cpu", r.CPU.Server.ProcessPct, 27.9651222302056)
	if r.Tool.Version != "3.12" || r.MsgSizeBytes != 131072 || r.Parallel != 1 || r.DurationSeconds != 1.002652 {
		t.Fatalf("tool/size/parallel/duration = %+v %d %d %v", r.Tool, r.MsgSizeBytes, r.Parallel, r.DurationSeconds)
	}
	if r.Throughput.SenderPps != nil || r.Missing["throughput.sender_pps"] == "" {
		t.Fatal("TCP pps must be nil with a reason")
	}
	if r.Start.IsZero() || len(r.Streams) != 0 {
		t.Fatalf("start %v, streams %d", r.Start, len(r.Streams))
	}
}

func TestParseTCPParallelWithServerText(t *testing.T) {
	s := golden.Spec("tcp_bw", 0)
	s.Parallel = 2
	r := golden.ParseOut(t, s, drivertest.Golden(t, "tcp_P2_server_text.json"))
	if r.Parallel != 2 || len(r.Streams) != 2 {
		t.Fatalf("parallel %d streams %d", r.Parallel, len(r.Streams))
	}
	var sum float64
	for _, st := range r.Streams {
		sum += *st.Throughput.ReceiverBps
	}
	if math.Abs(sum-*r.Throughput.ReceiverBps)/sum > 0.01 {
		t.Fatalf("streams sum %v, total %v", sum, *r.Throughput.ReceiverBps)
	}
	if !reflect.DeepEqual(r.Tool.Command, []string{"iperf3", "-c", "127.0.0.1", "-p", "15210", "-t", "1", "-P", "2", "-J"}) {
		t.Fatalf("command %q", r.Tool.Command)
	}
}

func TestParseTCPOmit(t *testing.T) {
	r := golden.Parse(t, "tcp_bw", 0, "tcp_omit1.json")
	if r.WarmupSeconds != 1 || r.DurationSeconds != 2.000073 {
		t.Fatalf("warmup %v duration %v", r.WarmupSeconds, r.DurationSeconds)
	}
}

func TestParseUDP(t *testing.T) {
	r := golden.Parse(t, "udp_bw", 1400, "udp_b0_l1400.json")
	u := r.UDP
	if u.Sent != 86620 || u.Lost != 49417 || u.Received != 86620-49417 || u.OutOfOrder == nil || *u.OutOfOrder != 0 {
		t.Fatalf("udp %+v", u)
	}
	if u.LossPct != 57.0503347956592 {
		t.Fatalf("loss %v", u.LossPct)
	}
	golden.Near(t, "jitter ns", u.JitterNs, 0.007456816714357528*1e6)
	golden.Near(t, "receiver bps", r.Throughput.ReceiverBps, 416078607.5911446)
	golden.Near(t, "sender pps", r.Throughput.SenderPps, 86620/1.001218)
	if r.Missing["udp.duplicated"] == "" || r.MsgSizeBytes != 1400 {
		t.Fatalf("missing %v size %d", r.Missing, r.MsgSizeBytes)
	}

	// With the server's own -J document embedded (--get-server-output).
	r = golden.Parse(t, "udp_bw", 1400, "udp_server_json.json")
	if r.UDP.Lost != 75 || r.UDP.Sent != 8922 {
		t.Fatalf("udp %+v", r.UDP)
	}
}

func TestParseUDPLegacy(t *testing.T) {
	r := golden.Parse(t, "udp_bw", 1400, "edited_udp_legacy_sum_only.json")
	if r.Throughput.ReceiverBps != nil || r.Missing["throughput.receiver_bps"] == "" {
		t.Fatal("legacy layout: receiver bps must be nil with a reason")
	}
	if r.UDP.Lost != 49417 || r.UDP.LossPct != 57.0503347956592 {
		t.Fatalf("udp %+v", r.UDP)
	}
}

func TestParseErrors(t *testing.T) {
	golden.ParseErrors(t, []drivertest.ParseError{
		{File: "error_refused.json", Test: "tcp_bw", Want: "iperf3: unable to connect to server: Connection refused"},
		{File: "edited_error_busy.json", Test: "tcp_bw", Want: "iperf3: the server is busy"},
		{File: "edited_tcp_no_receiver_bps.json", Test: "tcp_bw", Want: "no end.sum_received.bits_per_second"},
		{File: "udp_b0_l1400.json", Test: "tcp_bw", Want: `ran a "UDP" test, tcp_bw was asked`},
		{File: "tcp_P1.json", Test: "tcp_lat", Want: "iperf3 has no tcp_lat test"},
	})
	golden.Unparsable(t, golden.Spec("tcp_bw", 0), "", "iperf3: error - unable to connect", "{")
}

func TestCommands(t *testing.T) {
	d := Driver
	s := golden.Spec("udp_bw", 1024)
	s.Warmup = time.Second
	argv, err := d.ClientCommand(s)
	want := []string{"iperf3", "-c", "127.0.0.1", "-p", "15210", "-t", "1", "-O", "1", "-u", "-b", "0", "-l", "1024", "-J"}
	if err != nil || !reflect.DeepEqual(argv, want) {
		t.Fatalf("udp argv %q %v", argv, err)
	}
	s.RateBps = 3e9
	argv, _ = d.ClientCommand(s)
	if strings.Join(argv, " ") != "iperf3 -c 127.0.0.1 -p 15210 -t 1 -O 1 -u -b 3000000000 -l 1024 -J" {
		t.Fatalf("rate argv %q", argv)
	}
	s.Warmup = 500 * time.Millisecond
	if argv, _ := d.ClientCommand(s); strings.Join(argv[7:9], " ") != "-O 1" {
		t.Fatalf("500ms warmup must round up to -O 1: %q", argv)
	}
	s.Duration = 1500 * time.Millisecond
	if _, err := d.ClientCommand(s); err == nil || !strings.Contains(err.Error(), "whole seconds") {
		t.Fatalf("fractional duration: %v", err)
	}
	for _, test := range []string{"tcp_lat", "udp_lat", "tcp_crr"} {
		if err := d.Supports(test); err == nil || !strings.Contains(err.Error(), "iperf3 has no "+test) {
			t.Fatalf("%s: %v", test, err)
		}
	}
	argv, _ = d.ServerCommand(driver.Spec{Port: 5999})
	if strings.Join(argv, " ") != "iperf3 -s -1 -p 5999" {
		t.Fatalf("server %q", argv)
	}
	if v, err := versionOf("iperf 3.12 (cJSON 1.7.15)\nLinux vm"); err != nil || v != "3.12" {
		t.Fatal(v, err)
	}
}

// Sizes iperf3's own argument parser refuses are refused when the command is
// built, so an experiment with them fails its check, not every child.
func TestCommandSizeLimits(t *testing.T) {
	golden.SizeLimits(t, "udp_bw", map[int]bool{15: false, 16: true, 65507: true, 65508: false})
	golden.SizeLimits(t, "tcp_bw", map[int]bool{1 << 20: true, 1<<20 + 1: false, 32 << 20: false})
}

// FuzzDecode: iperf3 -J output of any shape decodes or is refused without a
// panic, however deeply server_output_json nests.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"server_output_json":{"server_output_json":{"end":{}}}}`))
	drivertest.FuzzParse(f, "testdata/*.json", Decode, nil)
}

// TestPrivEndToEnd runs real iperf3 across a veth pair (privileged).
func TestPrivEndToEnd(t *testing.T) {
	rs := drivertest.Run(t, Driver, 15290,
		driver.Spec{Test: "tcp_bw", Duration: time.Second},
		driver.Spec{Test: "tcp_bw", Duration: time.Second, Parallel: 2},
		driver.Spec{Test: "udp_bw", MsgSize: 1024, Duration: time.Second, RateBps: 50e6},
	)
	for _, r := range rs {
		drivertest.CheckCommon(t, r)
		drivertest.CheckBandwidth(t, r)
		if r.CPU.Server == nil || r.CPU.Server.ProcessPct == nil {
			t.Errorf("%s: iperf3's remote CPU not recorded", r.Test)
		}
	}
	if rs[1].Parallel != 2 || len(rs[1].Streams) != 2 {
		t.Errorf("parallel run: parallel %d, %d streams", rs[1].Parallel, len(rs[1].Streams))
	}
	if u := rs[2].UDP; u == nil || u.Sent == 0 || u.JitterNs == nil {
		t.Errorf("udp accounting: %+v", u)
	}
}
