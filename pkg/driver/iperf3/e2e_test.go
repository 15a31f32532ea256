package iperf3

import (
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/drivertest"
	"github.com/cnibench/cnibench/pkg/driver"
)

// TestPrivEndToEnd runs real iperf3 across a veth pair (privileged).
func TestPrivEndToEnd(t *testing.T) {
	rs := drivertest.Run(t, Driver{}, 15290,
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
