package wakeup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

func writeSys(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, v := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDetectAndResolve(t *testing.T) {
	haltpoll := writeSys(t, map[string]string{
		"devices/system/cpu/cpuidle/current_driver":      "haltpoll\n",
		"devices/system/cpu/cpu0/cpuidle/state0/latency": "0\n",
		"devices/system/cpu/cpu0/cpuidle/state1/latency": "1\n",
	})
	h := Detect(haltpoll)
	if h.Driver != "haltpoll" || h.DeepStates != 1 {
		t.Fatalf("Detect(haltpoll) = %+v", h)
	}
	if p, why := Resolve(Auto, h); p != Hold || !strings.Contains(why, "haltpoll") {
		t.Errorf("Resolve(auto, haltpoll) = %s (%s)", p, why)
	}
	none := writeSys(t, map[string]string{"devices/system/cpu/cpuidle/current_driver": "none\n"})
	if p, _ := Resolve(Auto, Detect(none)); p != Spin {
		t.Errorf("Resolve(auto, none) = %s, want spin", p)
	}
	// No cpuidle directory at all: the arch's default idle, like "none".
	if h := Detect(t.TempDir()); h.Driver != "none" {
		t.Errorf("Detect(empty) = %+v", h)
	}
	if p, _ := Resolve(None, h); p != None {
		t.Errorf("an explicit policy must come back unchanged, got %s", p)
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
	if n := countComm(t, SpinComm); n != 1 {
		t.Errorf("%d %s processes while spinning, want 1", n, SpinComm)
	}
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if n := countComm(t, SpinComm); n != 0 {
		t.Errorf("%d %s processes after release", n, SpinComm)
	}

	c, err := Calibrate(Detect("/sys"), Options{Exe: bin}, 2, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if c.OneWayUs[None] <= 0 || c.Chosen == "" || c.Why == "" {
		t.Errorf("calibration %+v", c)
	}
	if n := countComm(t, SpinComm); n != 0 {
		t.Errorf("%d %s processes after calibration", n, SpinComm)
	}
	t.Logf("calibration: %s → %s", c.Why, c.Chosen)
}

func countComm(t *testing.T, comm string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			n++
		}
	}
	return n
}
