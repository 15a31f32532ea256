package builtin

import (
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/drivertest"

	"github.com/cnibench/cnibench/pkg/driver"
)

func read(t *testing.T, name string) []byte { t.Helper(); return drivertest.Golden(t, name) }

func spec(test string, size int) driver.Spec {
	return driver.Spec{Server: "127.0.0.1", Port: 17420, Test: test, MsgSize: size, Duration: time.Second}
}

func TestParse(t *testing.T) {
	Binary = "/opt/cnibench"
	t.Cleanup(func() { Binary = "" })
	r, err := Driver{}.Parse(spec("tcp_lat", 1), read(t, "tcp_lat_1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Latency == nil || *r.Latency.RTTNs.P50 != 18511 || r.Latency.RTTNs.Count != 40834 {
		t.Fatalf("latency %+v", r.Latency)
	}
	if r.Tool.Name != "cnibench" || strings.Join(r.Tool.Command, " ") !=
		"/opt/cnibench client --server 127.0.0.1 --port 17420 --test tcp_lat --msg-size 1 --duration 1s --warmup 0s --parallel 1 --json" {
		t.Fatalf("tool %+v", r.Tool)
	}
	r, err = Driver{}.Parse(spec("tcp_bw", 1024), read(t, "two_tests_two_sizes.json"))
	if err != nil {
		t.Fatal(err)
	}
	if *r.Throughput.BytesReceived != 501012480 {
		t.Fatalf("picked the wrong result: %+v", r.Throughput)
	}
	r, err = Driver{}.Parse(spec("udp_bw", 1024), read(t, "udp_bw_1024.json"))
	if err != nil || r.UDP == nil || r.UDP.Sent != 12202 {
		t.Fatalf("udp_bw: %+v %v", r, err)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		file, test string
		size       int
		want       string
	}{
		{"tcp_lat_1.json", "tcp_lat", 64, "no tcp_lat result at 64 bytes"},
		{"edited_duplicate.json", "tcp_lat", 1, "more than one"},
		{"edited_old_schema.json", "tcp_lat", 1, `schema "cnibench.results/v0"`},
	}
	for _, c := range cases {
		_, err := Driver{}.Parse(spec(c.test, c.size), read(t, c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.file, err, c.want)
		}
	}
	if _, err := (Driver{}).Parse(spec("tcp_lat", 1), []byte("cnibench: --server HOST is required\n")); err == nil {
		t.Error("text parsed as a result set")
	}
}

func TestCommands(t *testing.T) {
	Binary = "/opt/cnibench"
	t.Cleanup(func() { Binary = "" })
	s := spec("udp_bw", 64)
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
