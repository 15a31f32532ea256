package driver_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cnibench/cnibench/pkg/driver"
	_ "github.com/cnibench/cnibench/pkg/driver/builtin"
	_ "github.com/cnibench/cnibench/pkg/driver/iperf3"
	_ "github.com/cnibench/cnibench/pkg/driver/qperf"
	_ "github.com/cnibench/cnibench/pkg/driver/sockperf"
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
