package driver_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cnibench/cnibench/pkg/driver"
	_ "github.com/cnibench/cnibench/pkg/driver/builtin"
	"github.com/cnibench/cnibench/pkg/driver/iperf3"
	"github.com/cnibench/cnibench/pkg/driver/qperf"
	"github.com/cnibench/cnibench/pkg/driver/sockperf"
)

// ToolPaths finds every reference tool (not the built-in engine) on $PATH
// in name order, and a missing one is the driver's ErrNotInstalled.
func TestToolPaths(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := driver.ToolPaths(); !errors.Is(err, driver.ErrNotInstalled) {
		t.Fatalf("no tools on PATH: got %v, want ErrNotInstalled", err)
	}
	var want []string
	for _, name := range []string{"iperf3", "qperf", "sockperf"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	got, err := driver.ToolPaths()
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
}

// Callers branch on what kind of refusal a driver gave, never on its text.
func TestTypedDriverErrors(t *testing.T) {
	for _, tc := range []struct {
		d    driver.Driver
		test string
	}{{qperf.Driver, "tcp_crr"}, {iperf3.Driver, "tcp_lat"}, {sockperf.Driver, "tcp_bw"}, {qperf.Driver, "nosuch"}} {
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
