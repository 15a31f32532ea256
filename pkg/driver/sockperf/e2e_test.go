package sockperf

import (
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/drivertest"
	"github.com/cnibench/cnibench/pkg/driver"
)

// TestPrivEndToEnd runs real sockperf across a veth pair (privileged).
func TestPrivEndToEnd(t *testing.T) {
	rs := drivertest.Run(t, Driver{}, 11190,
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
