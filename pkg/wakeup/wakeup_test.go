package wakeup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/fixture"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Policy{"": Auto, "auto": Auto, "spin": Spin, " hold ": Hold, "none": None} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Parse("poll"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "auto, spin, hold or none") {
		t.Errorf("Parse(poll) = %v", err)
	}
}

func TestDetect(t *testing.T) {
	haltpoll := fixture.Tree(t, map[string]string{
		"devices/system/cpu/cpuidle/current_driver":      "haltpoll\n",
		"devices/system/cpu/cpu0/cpuidle/state0/latency": "0\n",
		"devices/system/cpu/cpu0/cpuidle/state1/latency": "1\n",
	})
	if h := Detect(haltpoll); h.Driver != "haltpoll" || h.DeepStates != 1 {
		t.Fatalf("Detect(haltpoll) = %+v", h)
	}
	// No cpuidle directory at all: the arch's default idle, like "none".
	if h := Detect(t.TempDir()); h.Driver != "none" {
		t.Errorf("Detect(empty) = %+v", h)
	}
}

func TestForTest(t *testing.T) {
	for _, c := range []struct {
		p    Policy
		test string
		want Policy
	}{
		{Auto, "tcp_lat", Hold}, {Auto, "udp_lat", Hold}, {Auto, "tcp_crr", Hold},
		{Auto, "tcp_bw", None}, {Auto, "udp_bw", None}, {"", "tcp_lat", Hold},
		{None, "tcp_lat", None}, {Spin, "tcp_bw", Spin}, {Hold, "udp_bw", Hold},
	} {
		got, why := ForTest(c.p, c.test)
		if got != c.want {
			t.Errorf("ForTest(%q, %s) = %s, want %s", c.p, c.test, got, c.want)
		}
		if (why != "") != (c.p == Auto || c.p == "") {
			t.Errorf("ForTest(%q, %s): reason %q", c.p, c.test, why)
		}
	}
}

// TestPrivHoldAndSpin puts each policy in force and checks the host sees it:
// the kernel reports cpu_dma_latency 0 while held and its old value after,
// and a cnb-spin process exists while spinning and is gone after Release.
func TestPrivHoldAndSpin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (/dev/cpu_dma_latency)")
	}
	bin := os.Getenv("CNIBENCH_BIN")
	read := func() []byte {
		b, err := os.ReadFile("/dev/cpu_dma_latency")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := read()
	h, err := Start(Hold, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(); string(got) != "\x00\x00\x00\x00" {
		t.Errorf("held: cpu_dma_latency = %x, want 0", got)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if got := read(); string(got) != string(before) {
		t.Errorf("after release: %x, want %x", got, before)
	}

	if bin == "" {
		t.Skip("spin needs the cnibench binary: set CNIBENCH_BIN")
	}
	s, err := Start(Spin, Options{Exe: bin})
	if err != nil {
		t.Fatal(err)
	}
	comm := func() string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", s.Pid))
		return strings.TrimSpace(string(b))
	}
	if comm() != SpinComm {
		t.Errorf("spinner pid %d is %q, want %s", s.Pid, comm(), SpinComm)
	}
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if comm() != "" {
		t.Errorf("spinner %d still there after release", s.Pid)
	}
}

// TestMain lets the test binary play a cnibench run that starts a spinner
// and is then SIGKILLed (see TestPrivSpinnerDiesWithKilledParent).
func TestMain(m *testing.M) {
	if os.Getenv("CNB_WAKEUP_HELPER") == "1" {
		h, err := Start(Spin, Options{Exe: os.Getenv("CNIBENCH_BIN")})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("spinning", h.Pid)
		select {}
	}
	os.Exit(m.Run())
}

// A run killed with SIGKILL cannot release its policy; the spinner must die
// with it (PR_SET_PDEATHSIG), leaving no CPU busy.
func TestPrivSpinnerDiesWithKilledParent(t *testing.T) {
	bin := os.Getenv("CNIBENCH_BIN")
	if os.Geteuid() != 0 || bin == "" {
		t.Skip("needs root and CNIBENCH_BIN")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "CNB_WAKEUP_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	var pid int
	if _, err := fmt.Sscanf(line, "spinning %d", &pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q", line)
	}
	comm := func() string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return strings.TrimSpace(string(b))
	}
	if comm() != SpinComm {
		t.Errorf("pid %d is %q while the helper runs, want %s", pid, comm(), SpinComm)
	}
	cmd.Process.Kill() // SIGKILL: no deferred release runs
	cmd.Wait()
	deadline := time.Now().Add(3 * time.Second)
	for comm() == SpinComm {
		if time.Now().After(deadline) {
			t.Fatalf("the spinner outlived its SIGKILLed parent")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
