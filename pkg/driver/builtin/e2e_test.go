package builtin

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/drivertest"
	"github.com/cnibench/cnibench/pkg/driver"
)

// TestPrivEndToEnd runs `cnibench server` and `cnibench client --json` across a
// veth pair through Measure (privileged). It needs the built binary in
// $CNIBENCH_BIN (`make test` sets it); the test binary itself is not cnibench.
func TestPrivEndToEnd(t *testing.T) {
	bin := os.Getenv("CNIBENCH_BIN")
	if bin == "" {
		t.Skip("CNIBENCH_BIN is not set (make test builds bin/cnibench and sets it)")
	}
	if err := exec.Command(bin, "server", "--help").Run(); err != nil {
		t.Skipf("%s has no working `server` command (%v); the engine is not in this build", bin, err)
	}
	rs := drivertest.Run(t, Driver{}, 17490,
		driver.Spec{Test: "tcp_lat", MsgSize: 64, Duration: time.Second},
		driver.Spec{Test: "tcp_bw", MsgSize: 1024, Duration: time.Second},
	)
	drivertest.CheckCommon(t, rs[0])
	drivertest.CheckLatency(t, rs[0])
	drivertest.CheckBandwidth(t, rs[1])
}
