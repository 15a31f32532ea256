package driver_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	_ "github.com/cnibench/cnibench/pkg/driver/builtin"
	"github.com/cnibench/cnibench/pkg/driver/iperf3"
	"github.com/cnibench/cnibench/pkg/driver/qperf"
	"github.com/cnibench/cnibench/pkg/driver/sockperf"
	"github.com/cnibench/cnibench/pkg/result"
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

// referenceTools is, per reference tool, what its driver says without
// measuring: users read these words (in `k8s run`, experiment checks and
// --engine errors), so they are pinned to the letter.
var referenceTools = []struct {
	d        driver.Driver
	name     string
	port     int
	runs     []string          // the tests Supports accepts
	refusals map[string]string // every other test -> Supports error
}{
	{iperf3.Driver, "iperf3", 5201, []string{result.TCPBW, result.UDPBW}, map[string]string{
		result.TCPLat: "iperf3 has no tcp_lat test (it only streams); use engine qperf, sockperf or builtin",
		result.UDPLat: "iperf3 has no udp_lat test (it only streams); use engine qperf, sockperf or builtin",
		result.TCPCRR: "iperf3 has no tcp_crr test (it only streams); use engine qperf, sockperf or builtin",
		"nosuch":      `iperf3: unknown test "nosuch" (iperf3 runs tcp_bw, udp_bw)`,
	}},
	{qperf.Driver, "qperf", 19765, []string{result.TCPLat, result.UDPLat, result.TCPBW, result.UDPBW}, map[string]string{
		result.TCPCRR: "qperf has no tcp_crr test; use engine builtin",
		"nosuch":      `qperf: unknown test "nosuch" (qperf runs tcp_lat, udp_lat, tcp_bw, udp_bw)`,
	}},
	{sockperf.Driver, "sockperf", 11111, []string{result.TCPLat, result.UDPLat}, map[string]string{
		result.TCPCRR: "sockperf has no tcp_crr test; use engine builtin",
		result.TCPBW:  "sockperf is used here for latency only (tcp_lat, udp_lat); for tcp_bw use engine iperf3, qperf or builtin",
		result.UDPBW:  "sockperf is used here for latency only (tcp_lat, udp_lat); for udp_bw use engine iperf3, qperf or builtin",
		"nosuch":      `sockperf: unknown test "nosuch" (sockperf runs tcp_lat, udp_lat)`,
	}},
}

// TestSupportsMessages: each reference tool runs its tests and refuses the
// others, and an unknown test, with an ErrNotSupported in its exact words.
func TestSupportsMessages(t *testing.T) {
	for _, tool := range referenceTools {
		for _, test := range tool.runs {
			if err := tool.d.Supports(test); err != nil {
				t.Errorf("%s.Supports(%s) = %v, want nil", tool.name, test, err)
			}
		}
		for test, want := range tool.refusals {
			if err := tool.d.Supports(test); err == nil || err.Error() != want || !errors.Is(err, driver.ErrNotSupported) {
				t.Errorf("%s.Supports(%s) = %v, want ErrNotSupported %q", tool.name, test, err, want)
			}
		}
		if n := len(tool.runs) + len(tool.refusals); n != len(result.Tests)+1 {
			t.Errorf("%s: the table names %d tests, want all %d and one unknown", tool.name, n, len(result.Tests))
		}
	}
}

// TestParallelRefusal: a tool that runs one connection per test refuses
// more, in its exact words, for each test it runs; the others build a command.
func TestParallelRefusal(t *testing.T) {
	for d, want := range map[driver.Driver]string{
		iperf3.Driver:   "",
		qperf.Driver:    "qperf runs one stream per test; for --parallel 2 use engine iperf3 or builtin",
		sockperf.Driver: "sockperf ping-pong runs one connection; for --parallel 2 use engine builtin",
	} {
		for _, test := range result.Tests {
			if d.Supports(test) != nil {
				continue
			}
			_, err := d.ClientCommand(driver.Spec{Server: "127.0.0.1", Test: test, MsgSize: 64, Duration: time.Second, Parallel: 2})
			if (want == "" && err != nil) || (want != "" && (err == nil || err.Error() != want)) {
				t.Errorf("%s %s with 2 streams: %v, want error %q", d.Name(), test, err, want)
			}
		}
	}
}

// TestToolFacts: each reference tool's engine name, default port, and the
// words of its Installed error, which names the Debian package to install.
func TestToolFacts(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, tool := range referenceTools {
		if got := tool.d.Name(); got != tool.name {
			t.Errorf("Name() = %q, want %q", got, tool.name)
		}
		if got := tool.d.(driver.DefaultPorter).DefaultPort(); got != tool.port {
			t.Errorf("%s: DefaultPort() = %d, want %d", tool.name, got, tool.port)
		}
		want := tool.name + " is not installed: apt-get install " + tool.name
		if err := tool.d.Installed(); err == nil || err.Error() != want || !errors.Is(err, driver.ErrNotInstalled) {
			t.Errorf("%s: Installed() = %v, want ErrNotInstalled %q", tool.name, err, want)
		}
	}
}

// TestToolVersion runs each tool's version flag against a stand-in on $PATH
// that prints out, and checks the version read from it, or the error.
func TestToolVersion(t *testing.T) {
	for _, c := range []struct {
		d              driver.Driver
		out, want, err string
	}{
		{iperf3.Driver, "iperf 3.12 (cJSON 1.7.15)\nLinux vm", "3.12", ""},
		{iperf3.Driver, "iperf3: no\n", "", `iperf3 version "iperf3: no": expected "iperf <version>"`},
		{qperf.Driver, "qperf 0.4.11\n", "0.4.11", ""},
		{qperf.Driver, "qperf\n", "", `qperf --version printed "qperf", expected "qperf <version>"`},
		{sockperf.Driver, "sockperf, version 3.7-no.git\n", "3.7-no.git", ""},
		{sockperf.Driver, "something else\n", "", `sockperf --version printed no version line: "something else"`},
	} {
		dir := t.TempDir()
		t.Setenv("PATH", dir)
		script := "#!/bin/sh\n[ \"$*\" = --version ] || exit 1\nprintf '" + c.out + "'\n"
		if err := os.WriteFile(filepath.Join(dir, c.d.Name()), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		v, err := c.d.Version()
		if (c.err == "" && (err != nil || v != c.want)) || (c.err != "" && (err == nil || err.Error() != c.err)) {
			t.Errorf("%s printing %q: Version() = %q, %v; want %q or error %q", c.d.Name(), c.out, v, err, c.want, c.err)
		}
	}
}
