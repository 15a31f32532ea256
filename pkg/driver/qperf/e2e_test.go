package qperf

import (
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/drivertest"
	"github.com/cnibench/cnibench/pkg/driver"
)

// TestPrivEndToEnd runs real qperf across a veth pair (privileged).
func TestPrivEndToEnd(t *testing.T) {
	var specs []driver.Spec
	for _, test := range []string{"tcp_lat", "udp_lat", "tcp_bw", "udp_bw"} {
		specs = append(specs, driver.Spec{Test: test, MsgSize: 1024, Duration: time.Second})
	}
	rs := drivertest.Run(t, Driver{}, 19790, specs...)
	for _, r := range rs {
		drivertest.CheckCommon(t, r)
		if r.Test == "tcp_lat" || r.Test == "udp_lat" {
			drivertest.CheckLatency(t, r)
		} else {
			drivertest.CheckBandwidth(t, r)
		}
	}
}
