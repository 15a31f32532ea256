package builtin

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/drivertest"
	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/result"
)

var golden = drivertest.Goldens{Driver: Driver{}, Port: 17420}

func TestParse(t *testing.T) {
	Binary = "/opt/cnibench"
	t.Cleanup(func() { Binary = "" })
	r := golden.Parse(t, "tcp_lat", 1, "tcp_lat_1.json")
	if r.Latency == nil || *r.Latency.RTTNs.P50 != 18511 || r.Latency.RTTNs.Count != 40834 {
		t.Fatalf("latency %+v", r.Latency)
	}
	if r.Tool.Name != "cnibench" || strings.Join(r.Tool.Command, " ") !=
		"/opt/cnibench client --server 127.0.0.1 --port 17420 --test tcp_lat --msg-size 1 --duration 1s --warmup 0s --parallel 1 --json" {
		t.Fatalf("tool %+v", r.Tool)
	}
	r = golden.Parse(t, "tcp_bw", 1024, "two_tests_two_sizes.json")
	if *r.Throughput.BytesReceived != 501012480 {
		t.Fatalf("picked the wrong result: %+v", r.Throughput)
	}
	r = golden.Parse(t, "udp_bw", 1024, "udp_bw_1024.json")
	if r.UDP == nil || r.UDP.Sent != 12202 {
		t.Fatalf("udp_bw: %+v", r)
	}
}

func TestParseErrors(t *testing.T) {
	golden.ParseErrors(t, []drivertest.ParseError{
		{File: "tcp_lat_1.json", Test: "tcp_lat", Size: 64, Want: "no tcp_lat result at 64 bytes"},
		{File: "edited_duplicate.json", Test: "tcp_lat", Size: 1, Want: "more than one"},
		{File: "edited_old_schema.json", Test: "tcp_lat", Size: 1, Want: `schema "cnibench.results/v0"`},
	})
	// Text is not a result set.
	golden.Unparsable(t, golden.Spec("tcp_lat", 1), "cnibench: --server HOST is required\n")
}

func TestCommands(t *testing.T) {
	Binary = "/opt/cnibench"
	t.Cleanup(func() { Binary = "" })
	s := golden.Spec("udp_bw", 64)
	s.Port, s.Parallel, s.RateBps, s.Warmup = 0, 4, 5e8, 2*time.Second
	argv, err := Driver{}.ClientCommand(s)
	if err != nil {
		t.Fatal(err)
	}
	want := "/opt/cnibench client --server 127.0.0.1 --test udp_bw --msg-size 64 --duration 1s --warmup 2s --parallel 4 --rate 500000000 --json"
	if strings.Join(argv, " ") != want {
		t.Fatalf("argv\n%s\nwant\n%s", strings.Join(argv, " "), want)
	}
	argv, _ = Driver{}.ServerCommand(driver.Spec{})
	if strings.Join(argv, " ") != "/opt/cnibench server --listen :7420" {
		t.Fatalf("server %q", argv)
	}
	if err := (Driver{}).Installed(); err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Fatalf("installed: %v", err)
	}
	if err := (Driver{}).Supports("tcp_crr"); err != nil {
		t.Fatal(err)
	}
}

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

// TestPrivRanOnPinned pins the client to one CPU and the server to another
// (driver.Spec.ClientCPU/ServerCPU, the placement `--cpus` gives a run) and
// checks that every test's ran_on puts each side 100 % on its own CPU; then
// the other way round, so a sampler that reported a fixed CPU, the process's
// first thread's or the other side's would fail.
func TestPrivRanOnPinned(t *testing.T) {
	testns.NeedRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	Binary = testns.Binary(t)
	t.Cleanup(func() { Binary = "" })
	p := testns.NewPair(t)
	first, last := 0, runtime.NumCPU()-1
	for _, cpus := range [][2]int{{first, last}, {last, first}} {
		for _, test := range result.Tests {
			spec := driver.Spec{Server: p.AIP.String(), Port: 17492, Test: test, MsgSize: 64,
				Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond, ClientCPU: &cpus[0], ServerCPU: &cpus[1]}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			r, err := driver.Measure(ctx, Driver{}, spec, p.A, p.B)
			cancel()
			if err != nil {
				t.Fatalf("%s client on cpu %d, server on cpu %d: %v", test, cpus[0], cpus[1], err)
			}
			for side, cpu := range map[string]int{"client": cpus[0], "server": cpus[1]} {
				c := r.CPU.Client
				if side == "server" {
					c = r.CPU.Server
				}
				want := []result.CPUShare{{CPU: cpu, Pct: 100}}
				if c == nil || !reflect.DeepEqual(c.RanOn, want) {
					var got any
					if c != nil {
						got = c.RanOn
					}
					t.Errorf("%s pinned to cpu %d: %s ran_on %v, want %v (missing: %q)",
						test, cpu, side, got, want, r.Missing["cpu."+side+".ran_on"])
				}
			}
		}
	}
}
