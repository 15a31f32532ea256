// Package drivertest holds what the drivers' tests share: parsing golden
// tool output (Goldens), fuzzing a parser from those files (FuzzParse), and,
// end to end, running a driver across a fresh namespace pair and checking
// that no server process outlives the measurement.
package drivertest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/result"
)

// Processes returns the pids whose command line is exactly argv.
func Processes(argv []string) []int {
	want := strings.Join(argv, "\x00")
	return driver.Procs("cmdline", func(_ int, cmdline []byte) bool {
		return strings.TrimRight(string(cmdline), "\x00") == want
	})
}

// Run measures each spec with d from namespace B to a server in namespace A
// of a new pair (server address and port are filled in), and checks after
// each one that the server process is gone. It skips when not root or when
// the tool is not installed.
func Run(t *testing.T, d driver.Driver, port int, specs ...driver.Spec) []*result.Result {
	t.Helper()
	testns.NeedRoot(t)
	if err := d.Installed(); err != nil {
		t.Skip(err)
	}
	p := testns.NewPair(t)
	var out []*result.Result
	for _, s := range specs {
		s.Server, s.Port = p.AIP.String(), port
		srv, err := d.ServerCommand(s)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.Duration+s.Warmup+time.Minute)
		r, err := driver.Measure(ctx, d, s, p.A, p.B)
		cancel()
		if left := Processes(srv); len(left) > 0 {
			t.Errorf("%s server %v still running after Measure: pids %v", d.Name(), srv, left)
		}
		if err != nil {
			t.Fatalf("%s %s %dB: %v", d.Name(), s.Test, s.MsgSize, err)
		}
		t.Logf("%s %s %dB: %s", d.Name(), s.Test, s.MsgSize, Summary(r))
		out = append(out, r)
	}
	return out
}

// Summary is a one-line view of a result for test logs.
func Summary(r *result.Result) string {
	var b strings.Builder
	if r.Latency != nil && r.Latency.OneWayNs.Mean != nil {
		b.WriteString("one-way mean " + strconv.FormatFloat(*r.Latency.OneWayNs.Mean/1e3, 'f', 2, 64) + " us ")
	}
	if r.Throughput != nil && r.Throughput.ReceiverBps != nil {
		b.WriteString("receiver " + strconv.FormatFloat(*r.Throughput.ReceiverBps/1e6, 'f', 1, 64) + " Mb/s ")
	}
	if r.UDP != nil {
		b.WriteString("loss " + strconv.FormatFloat(r.UDP.LossPct, 'f', 2, 64) + "% ")
	}
	if r.CPU != nil && r.CPU.Client != nil && r.CPU.Client.ProcessPct != nil {
		b.WriteString("client cpu " + strconv.FormatFloat(*r.CPU.Client.ProcessPct, 'f', 1, 64) + "% ")
	}
	if r.CPU != nil && r.CPU.Server != nil && r.CPU.Server.ProcessSeconds != nil {
		b.WriteString("server cpu-s " + strconv.FormatFloat(*r.CPU.Server.ProcessSeconds, 'f', 3, 64) + " ")
	}
	b.WriteString("(" + r.Tool.Name + " " + r.Tool.Version + ")")
	return b.String()
}

// CheckLatency fails t unless r has a one-way mean in (0, 10 ms) and an RTT
// twice as large.
func CheckLatency(t *testing.T, r *result.Result) {
	t.Helper()
	if r.Latency == nil || r.Latency.OneWayNs.Mean == nil || r.Latency.RTTNs.Mean == nil {
		t.Fatalf("%s: no latency: %+v", r.Test, r.Latency)
	}
	ow, rtt := *r.Latency.OneWayNs.Mean, *r.Latency.RTTNs.Mean
	if ow <= 0 || ow >= 10e6 {
		t.Errorf("%s: one-way mean %v ns is not in (0, 10 ms)", r.Test, ow)
	}
	if d := rtt - 2*ow; d > 1 || d < -1 {
		t.Errorf("%s: rtt %v is not 2 × one-way %v", r.Test, rtt, ow)
	}
}

// CheckBandwidth fails t unless r has a positive receiver rate.
func CheckBandwidth(t *testing.T, r *result.Result) {
	t.Helper()
	if r.Throughput == nil || r.Throughput.ReceiverBps == nil || *r.Throughput.ReceiverBps <= 0 {
		t.Fatalf("%s: no positive receiver bandwidth: %+v", r.Test, r.Throughput)
	}
}

// CheckCommon fails t unless the tool, its version and the client's CPU are recorded.
func CheckCommon(t *testing.T, r *result.Result) {
	t.Helper()
	if r.Tool.Name == "" || r.Tool.Version == "" || len(r.Tool.Command) == 0 {
		t.Errorf("%s: tool not recorded: %+v (missing: %v)", r.Test, r.Tool, r.Missing)
	}
	if r.CPU == nil || r.CPU.Client == nil || r.CPU.Client.ProcessSeconds == nil {
		t.Errorf("%s: client process CPU not recorded: %+v", r.Test, r.CPU)
	}
}
