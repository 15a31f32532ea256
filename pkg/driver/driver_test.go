package driver_test

import (
	"errors"
	"testing"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/driver/iperf3"
	"github.com/cnibench/cnibench/pkg/driver/qperf"
	"github.com/cnibench/cnibench/pkg/driver/sockperf"
)

// Callers branch on what kind of refusal a driver gave, never on its text.
func TestTypedDriverErrors(t *testing.T) {
	for _, tc := range []struct {
		d    driver.Driver
		test string
	}{{qperf.Driver{}, "tcp_crr"}, {iperf3.Driver{}, "tcp_lat"}, {sockperf.Driver{}, "tcp_bw"}, {qperf.Driver{}, "nosuch"}} {
		err := tc.d.Supports(tc.test)
		if !errors.Is(err, driver.ErrNotSupported) {
			t.Errorf("%s.Supports(%s) = %v, want ErrNotSupported", tc.d.Name(), tc.test, err)
		}
	}
	err := driver.CheckInstalled("cnibench-no-such-tool", "nothing")
	if !errors.Is(err, driver.ErrNotInstalled) || err.Error() != "cnibench-no-such-tool is not installed: apt-get install nothing" {
		t.Errorf("CheckInstalled: %v", err)
	}
}
