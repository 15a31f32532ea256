package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/testns"

	"github.com/cnibench/cnibench/pkg/result"
	"golang.org/x/sys/unix"
)

// The test binary doubles as a fake tool (the os/exec helper-process
// pattern), so Measure's process handling is tested without qperf & co.
const helperEnv = "CNIBENCH_DRIVER_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

func helper(mode, arg string) int {
	switch mode {
	case "listen", "listen-stubborn", "listen-fork":
		if mode == "listen-stubborn" {
			signal.Ignore(unix.SIGTERM)
		}
		if mode == "listen-fork" {
			// A grandchild in the same process group, like qperf's per-test
			// child; it writes its pid where the test can find it.
			c := exec.Command("sleep", "300")
			if err := c.Start(); err != nil {
				return 1
			}
			_ = os.WriteFile(os.Getenv("CNIBENCH_CHILD_PID_FILE"), []byte(strconv.Itoa(c.Process.Pid)), 0o600)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+arg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer ln.Close()
		select {}
	case "exit":
		fmt.Fprintln(os.Stderr, "fake: cannot bind: address already in use")
		return 1
	case "client-ok":
		// Burn some CPU so rusage has something to report.
		end := time.Now().Add(150 * time.Millisecond)
		x := 0
		for time.Now().Before(end) {
			x++
		}
		fmt.Println("ok 1000", x > 0)
		return 0
	case "client-fail":
		fmt.Fprintln(os.Stderr, "fake: connection refused")
		return 3
	case "client-hang":
		time.Sleep(time.Hour)
	}
	return 2
}

// fakeDriver runs the helper modes above.
type fakeDriver struct{ server, client string }

func (fakeDriver) Name() string          { return "fake" }
func (fakeDriver) Supports(string) error { return nil }
func (fakeDriver) Installed() error      { return nil }
func (fakeDriver) Version() (string, error) {
	return "", errors.New("fake has no version")
}
func (f fakeDriver) ServerCommand(s Spec) ([]string, error) {
	return []string{"env", helperEnv + "=" + f.server, os.Args[0], strconv.Itoa(s.Port)}, nil
}
func (f fakeDriver) ClientCommand(s Spec) ([]string, error) {
	return []string{"env", helperEnv + "=" + f.client, os.Args[0], "x"}, nil
}
func (fakeDriver) Parse(s Spec, out []byte) (*result.Result, error) {
	var n int64
	if _, err := fmt.Sscanf(string(out), "ok %d", &n); err != nil {
		return nil, fmt.Errorf("fake output %q: %w", out, err)
	}
	r := result.New(result.Tool{Name: "fake"}, s.Test, s.MsgSize)
	r.Transactions = &result.Transactions{Count: n}
	r.SetMissing("cpu.client.process_seconds", "fake does not measure CPU")
	return r, nil
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil
}

// serverPids finds helper servers started for port, to check they are gone.
func serverPids(t *testing.T, port int) []int {
	t.Helper()
	return Procs("cmdline", func(_ int, cmdline []byte) bool {
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		return len(args) >= 2 && args[0] == os.Args[0] && args[len(args)-1] == strconv.Itoa(port)
	})
}

func setTimeouts(t *testing.T) {
	ReadyTimeout, ClientMargin, StopGrace, ChildGrace = 3*time.Second, 2*time.Second, 300*time.Millisecond, 300*time.Millisecond
	t.Cleanup(func() {
		ReadyTimeout, ClientMargin, StopGrace, ChildGrace = 10*time.Second, 20*time.Second, 2*time.Second, 3*time.Second
	})
}

// measureReaped runs Measure with f on a free port and fails t if f's server
// outlives it, whatever Measure returned.
func measureReaped(ctx context.Context, t *testing.T, f fakeDriver, spec Spec) (*result.Result, error) {
	t.Helper()
	spec.Port = freePort(t)
	r, err := Measure(ctx, f, spec, "", "")
	if p := serverPids(t, spec.Port); len(p) > 0 {
		t.Fatalf("server still running after Measure (err %v): %v", err, p)
	}
	return r, err
}

func TestMeasureProcessHygiene(t *testing.T) {
	setTimeouts(t)
	pidFile := t.TempDir() + "/child.pid"
	t.Setenv("CNIBENCH_CHILD_PID_FILE", pidFile)
	spec := Spec{Server: "127.0.0.1", Test: "tcp_lat", MsgSize: 1, Duration: time.Second}

	t.Run("ok fills client CPU from rusage and stops the server group", func(t *testing.T) {
		r, err := measureReaped(context.Background(), t, fakeDriver{"listen-fork", "client-ok"}, spec)
		if err != nil {
			t.Fatal(err)
		}
		c := r.CPU.Client
		if c == nil || c.ProcessSeconds == nil || *c.ProcessSeconds <= 0 || c.ProcessPct == nil || c.UsPerTransaction == nil {
			t.Fatalf("client CPU not filled from rusage: %+v", c)
		}
		if *c.ProcessSeconds > 10 {
			t.Fatalf("client process seconds %v is not plausible for a 150 ms burn", *c.ProcessSeconds)
		}
		if _, ok := r.Missing["cpu.client.process_seconds"]; ok {
			t.Fatal("Missing entry for a filled field was kept")
		}
		// The forked `sleep 300` outlives the test: the server's rusage
		// would miss it, so server CPU must be null with a reason.
		if (r.CPU.Server != nil && r.CPU.Server.ProcessSeconds != nil) || !strings.Contains(r.Missing["cpu.server.process_seconds"], "forked children") {
			t.Fatalf("server CPU with live children: %+v, missing %q", r.CPU.Server, r.Missing["cpu.server.process_seconds"])
		}
		if r.Missing["tool.version"] == "" || len(r.Tool.Command) == 0 {
			t.Fatalf("tool version error / command not recorded: %+v %v", r.Tool, r.Missing)
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		child, _ := strconv.Atoi(string(b))
		deadline := time.Now().Add(2 * time.Second)
		for alive(child) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // reaped by init after the group kill
		}
		if alive(child) {
			_ = unix.Kill(child, unix.SIGKILL)
			t.Fatalf("server's forked child %d survived", child)
		}
	})

	t.Run("server ignoring SIGTERM is killed", func(t *testing.T) {
		r, err := measureReaped(context.Background(), t, fakeDriver{"listen-stubborn", "client-ok"}, spec)
		if err != nil {
			t.Fatal(err)
		}
		// No children: the server's own rusage is recorded.
		if r.CPU.Server == nil || r.CPU.Server.ProcessSeconds == nil {
			t.Fatalf("server CPU not recorded: %+v %v", r.CPU.Server, r.Missing)
		}
	})

	t.Run("client failure names stderr", func(t *testing.T) {
		_, err := measureReaped(context.Background(), t, fakeDriver{"listen", "client-fail"}, spec)
		if err == nil || !strings.Contains(err.Error(), "fake: connection refused") || !strings.Contains(err.Error(), "exit status 3") {
			t.Fatalf("err = %v", err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("error is not one line: %q", err)
		}
	})

	t.Run("server that exits early", func(t *testing.T) {
		_, err := measureReaped(context.Background(), t, fakeDriver{"exit", "client-ok"}, spec)
		if err == nil || !strings.Contains(err.Error(), "exited before listening") || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("client past its deadline is killed", func(t *testing.T) {
		spec.Duration = 100 * time.Millisecond
		start := time.Now()
		_, err := measureReaped(context.Background(), t, fakeDriver{"listen", "client-hang"}, spec)
		if err == nil || !strings.Contains(err.Error(), "did not finish") {
			t.Fatalf("err = %v", err)
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("deadline not enforced")
		}
	})

	t.Run("cancelled context", func(t *testing.T) {
		spec.Duration = time.Second
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(500*time.Millisecond, cancel)
		_, err := measureReaped(ctx, t, fakeDriver{"listen", "client-hang"}, spec)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

func TestParseProcNetBound(t *testing.T) {
	tcp := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:4D35 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1451 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
`)
	if !ParseProcNetBound(tcp, 0x4D35, true) {
		t.Error("listening port 19765 not found")
	}
	if ParseProcNetBound(tcp, 0x1451, true) {
		t.Error("an established TCP socket is not a listener")
	}
	if !ParseProcNetBound(tcp, 0x1451, false) {
		t.Error("for UDP any bound socket counts")
	}
	if ParseProcNetBound(tcp, 1, true) {
		t.Error("port 1 is not bound")
	}
}

func TestStatPgrp(t *testing.T) {
	g, ok := statPgrp([]byte("4242 (we ird) name)) S 1 4200 4200 0 -1 4194560 120 0 0 0 1 2 0 0 20 0 1 0 100 0 0\n"))
	if !ok || g != 4200 {
		t.Fatalf("pgrp = %d, %v", g, ok)
	}
	if _, ok := statPgrp([]byte("garbage")); ok {
		t.Fatal("garbage parsed")
	}
}

func TestTailLine(t *testing.T) {
	got := tailLine("a\nb\n\x1b[2;35mc\x1b[0m\nd\n", "")
	if got != "b | c | d" {
		t.Fatalf("tailLine = %q", got)
	}
	if tailLine("", "") != "(no output on stderr)" {
		t.Fatal("empty tail")
	}
}

func TestWholeSecondsAndInstalled(t *testing.T) {
	if s, err := WholeSeconds("x", 2*time.Second); err != nil || s != 2 {
		t.Fatal(s, err)
	}
	if _, err := WholeSeconds("x", 0); err == nil {
		t.Fatal("zero duration accepted")
	}
	err := CheckInstalled("cnibench-no-such-tool", "pkg")
	if err == nil || err.Error() != "cnibench-no-such-tool is not installed: apt-get install pkg" {
		t.Fatalf("err = %v", err)
	}
}

// A pinned process (and every thread it starts) may run only on its CPU,
// from its first instruction; the starting goroutine's own thread is not
// left pinned.
func TestStartPinned(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	startPinnedIn(t, "")
}

// The same inside a namespace, where the process is started from the
// thread that joined it: that thread, not the caller's, must be pinned
// (it once was not, and every lab arm's --cpus pinned nothing).
func TestPrivStartPinnedInNetns(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	startPinnedIn(t, testns.NewNetns(t, "pin"))
}

func startPinnedIn(t *testing.T, ns string) {
	t.Helper()
	for _, cpu := range []int{0, 1} {
		var out bytes.Buffer
		c := cpu
		p, err := startProcess(nil, ns, &c, []string{"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"}, &out)
		if err != nil {
			t.Fatal(err)
		}
		<-p.done
		if want := fmt.Sprintf("Cpus_allowed_list:\t%d\n", cpu); out.String() != want {
			t.Errorf("netns %q: pinned to %d: %q, want %q", ns, cpu, out.String(), want)
		}
	}
	var self unix.CPUSet
	if err := unix.SchedGetaffinity(0, &self); err != nil || self.Count() != runtime.NumCPU() {
		t.Errorf("the test's thread was left pinned: %d CPUs (%v)", self.Count(), err)
	}
}

// TestPortBoundOwnProtocolOnly: a UDP socket on a port does not make a TCP
// server ready there, nor a TCP listener a UDP-only one.
func TestPortBoundOwnProtocolOnly(t *testing.T) {
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	port := u.LocalAddr().(*net.UDPAddr).Port
	// This thread's own view: /proc/self/net is the main thread's, which
	// netns.Do once left in a lab's namespace (CI saw neither socket there;
	// TestPrivMainThreadStaysHome).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const self = "/proc/thread-self/net"
	if ok, err := portBound(self, port, false); err != nil || ok {
		t.Errorf("UDP socket on %d counted as a TCP listener: %v %v", port, ok, err)
	}
	if ok, err := portBound(self, port, true); err != nil || !ok {
		t.Errorf("UDP socket on %d not seen: %v %v", port, ok, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tport := l.Addr().(*net.TCPAddr).Port
	if ok, err := portBound(self, tport, false); err != nil || !ok {
		t.Errorf("TCP listener on %d not seen: %v %v", tport, ok, err)
	}
	if ok, err := portBound(self, tport, true); err != nil || ok {
		t.Errorf("TCP listener on %d counted as a UDP server: %v %v", tport, ok, err)
	}
}
