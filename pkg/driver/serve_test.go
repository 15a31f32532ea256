package driver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/driver/iperf3"
	"github.com/cnibench/cnibench/pkg/driver/qperf"
	"github.com/cnibench/cnibench/pkg/driver/sockperf"
)

func TestServers(t *testing.T) {
	for _, c := range []struct {
		d    driver.Driver
		port int
		want []driver.Server
	}{
		// The tool's own port, named as the lab's Measure names it.
		{qperf.Driver, 0, []driver.Server{{Argv: []string{"qperf", "--listen_port", "19765"}, Tests: []string{"tcp_lat", "udp_lat", "tcp_bw", "udp_bw"}}}},
		{qperf.Driver, 6000, []driver.Server{{Argv: []string{"qperf", "--listen_port", "6000"}, Tests: []string{"tcp_lat", "udp_lat", "tcp_bw", "udp_bw"}}}},
		// Persistent: no -1, so the pod's server outlives the first test.
		{iperf3.Driver, 0, []driver.Server{{Argv: []string{"iperf3", "-s", "-p", "5201"}, Tests: []string{"tcp_bw", "udp_bw"}}}},
		{sockperf.Driver, 0, []driver.Server{
			{Argv: []string{"sockperf", "server", "--tcp", "-p", "11111"}, Tests: []string{"tcp_lat"}},
			{Argv: []string{"sockperf", "server", "-p", "11111"}, Tests: []string{"udp_lat"}, UDPOnly: true},
		}},
	} {
		got, err := driver.Servers(c.d, c.port)
		if err != nil {
			t.Fatalf("%s: %v", c.d.Name(), err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s port %d:\n got %+v\nwant %+v", c.d.Name(), c.port, got, c.want)
		}
	}
	// The lab's one-off iperf3 server is unchanged.
	if argv, _ := iperf3.Driver.ServerCommand(driver.Spec{Test: "tcp_bw"}); !reflect.DeepEqual(argv, []string{"iperf3", "-s", "-1"}) {
		t.Errorf("lab iperf3 server: %v", argv)
	}
}

// procNet writes /proc/net-style tables holding the given bound ports.
func procNet(t *testing.T, tcpListen, udpBound []int) string {
	t.Helper()
	dir := t.TempDir()
	head := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	table := func(ports []int, st string) string {
		s := head
		for i, p := range ports {
			s += fmt.Sprintf("   %d: 00000000:%04X 00000000:0000 %s 00000000:00000000 00:00000000 00000000     0        0 1 1\n", i, p, st)
		}
		return s
	}
	os.WriteFile(filepath.Join(dir, "tcp"), []byte(table(tcpListen, "0A")), 0o644)
	os.WriteFile(filepath.Join(dir, "udp"), []byte(table(udpBound, "07")), 0o644)
	return dir
}

func TestListening(t *testing.T) {
	if err := driver.Listening(qperf.Driver, 0, procNet(t, []int{qperf.DefaultPort}, nil)); err != nil {
		t.Errorf("qperf listening: %v", err)
	}
	if err := driver.Listening(qperf.Driver, 0, procNet(t, nil, []int{qperf.DefaultPort})); !errors.Is(err, driver.ErrNotListening) {
		t.Errorf("qperf with only a UDP socket: %v", err)
	}
	// sockperf needs both its TCP and its UDP server.
	if err := driver.Listening(sockperf.Driver, 0, procNet(t, []int{sockperf.DefaultPort}, nil)); !errors.Is(err, driver.ErrNotListening) || !strings.Contains(err.Error(), "udp") {
		t.Errorf("sockperf without its UDP server: %v", err)
	}
	if err := driver.Listening(sockperf.Driver, 7000, procNet(t, []int{7000}, []int{7000})); err != nil {
		t.Errorf("sockperf on 7000: %v", err)
	}
}

type absent struct{ driver.Driver }

func (absent) Installed() error {
	return driver.NotInstalled("qperf is not installed: apt-get install qperf")
}

func TestServeMissingTool(t *testing.T) {
	err := driver.Serve(context.Background(), absent{qperf.Driver}, 0, io.Discard)
	if !errors.Is(err, driver.ErrNotInstalled) {
		t.Fatalf("want ErrNotInstalled, got %v", err)
	}
}

// The tool server serves only the reference tools; without the tool it
// says how to build an image that has it.
func TestToolServerRefusals(t *testing.T) {
	for _, engine := range []string{"builtin", "netperf", ""} {
		err := driver.ToolServer{Engine: engine}.Run(context.Background(), io.Discard)
		if !errors.Is(err, driver.ErrInvalid) || err.Error() != fmt.Sprintf("--engine %q: want qperf, iperf3 or sockperf", engine) {
			t.Errorf("--engine %q: %v", engine, err)
		}
	}
	t.Setenv("PATH", t.TempDir())
	err := driver.ToolServer{Engine: "iperf3"}.Run(context.Background(), io.Discard)
	if !errors.Is(err, driver.ErrNotInstalled) || !strings.HasPrefix(err.Error(), "iperf3 is not in this image (PATH=") ||
		!strings.Contains(err.Error(), "cnibench image build --with-tools") {
		t.Errorf("no iperf3: %v", err)
	}
}

// TestServeQperf runs the real qperf server through Serve on a free
// loopback-reachable port, measures once against it with the driver's
// client, then cancels: the server must be gone.
func TestServeQperf(t *testing.T) {
	if _, err := exec.LookPath("qperf"); err != nil {
		t.Skip("qperf is not installed (apt-get install qperf)")
	}
	// Listening reads this thread's namespace (thread-self): the main
	// thread may sit in a lab namespace an earlier test's netns.Do left it in.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	pr, pw := io.Pipe()
	go func() { done <- driver.Serve(ctx, qperf.Driver, port, pw); pw.Close() }()
	line := make([]byte, 200)
	n, _ := pr.Read(line)
	go io.Copy(io.Discard, pr)
	if !strings.Contains(string(line[:n]), fmt.Sprintf("qperf --listen_port %d", port)) {
		cancel()
		t.Fatalf("serve said %q: %v", line[:n], <-done)
	}
	if err := driver.Listening(qperf.Driver, port, "/proc/thread-self/net"); err != nil {
		t.Errorf("Listening after Serve's ready line: %v", err)
	}
	spec := driver.Spec{Server: "127.0.0.1", Port: port, Test: "tcp_lat", MsgSize: 1, Duration: time.Second}
	r, err := driver.MeasureClient(ctx, qperf.Driver, spec, "")
	if err != nil {
		t.Fatalf("measure against the served qperf: %v", err)
	}
	if r.Latency == nil {
		t.Errorf("no latency in %+v", r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
	if err := driver.Listening(qperf.Driver, port, "/proc/thread-self/net"); err == nil {
		t.Error("qperf still listening after Serve returned")
	}
}
