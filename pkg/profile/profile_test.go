package profile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const kallsymsFixture = `ffffffff81000000 T _stext
ffffffff81001000 t do_syscall_64
ffffffff81002000 D some_data
ffffffff81003000 T tcp_sendmsg
0000000000000000 T hidden
ffffffffc0001000 t veth_xmit	[veth]
`

func TestKallsymsLookup(t *testing.T) {
	s, err := ParseKallsyms(strings.NewReader(kallsymsFixture))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 4 {
		t.Fatalf("kept %d text symbols, want 4 (data and zero addresses dropped)", s.Len())
	}
	for addr, want := range map[uint64]string{
		0xffffffff81000000: "_stext",
		0xffffffff81001fff: "do_syscall_64",
		0xffffffff81002500: "do_syscall_64", // data symbols do not end a function
		0xffffffff81003010: "tcp_sendmsg",
		0xffffffffc0001234: "veth_xmit",
	} {
		if got, ok := s.Lookup(addr); !ok || got != want {
			t.Errorf("Lookup(%#x) = %q, %v; want %q", addr, got, ok, want)
		}
	}
	if _, ok := s.Lookup(0xffffffff80000000); ok {
		t.Error("an address below the first symbol resolved")
	}
	if _, err := ParseKallsyms(strings.NewReader("zz T x\n")); err == nil {
		t.Error("a bad address parsed")
	}
}

func TestFoldStack(t *testing.T) {
	s, _ := ParseKallsyms(strings.NewReader(kallsymsFixture))
	chain := []uint64{k(perfContextKernel), 0xffffffff81003010, 0xffffffff81001100, k(perfContextUser), 0x401000, 0x402000}
	if got, want := foldStack("iperf 3", 0, chain, s, nil), "iperf_3;[user];do_syscall_64;tcp_sendmsg"; got != want {
		t.Errorf("foldStack = %q, want %q", got, want)
	}
	if got, want := foldStack("cnibench", 0x401000, []uint64{k(perfContextUser), 0x401000}, s, nil), "cnibench;[user]"; got != want {
		t.Errorf("user-only = %q, want %q", got, want)
	}
	if got, want := foldStack("swapper", 0xffffffff81003010, nil, s, nil), "swapper;tcp_sendmsg"; got != want {
		t.Errorf("no chain = %q, want %q", got, want)
	}
	if got, want := foldStack("x", 0, []uint64{k(perfContextKernel), 0x10}, s, nil), "x;[unknown]"; got != want {
		t.Errorf("unknown = %q, want %q", got, want)
	}
	// A process whose user functions are resolved: the leaf (the first
	// user address) of a sample taken in user space, and nothing for one
	// taken in the kernel (its time is the kernel's stages).
	fn := func(a uint64) string { return fmt.Sprintf("[user:f%x@m]", a) }
	if got, want := foldStack("ovs-vswitchd", 0x401000, []uint64{k(perfContextUser), 0x401000, 0x402000}, s, fn), "ovs-vswitchd;[user];[user:f401000@m]"; got != want {
		t.Errorf("user function = %q, want %q", got, want)
	}
	if got, want := foldStack("ovs-vswitchd", 0x401000, nil, s, fn), "ovs-vswitchd;[user];[user:f401000@m]"; got != want {
		t.Errorf("user function, no chain = %q, want %q", got, want)
	}
	if got, want := foldStack("ovs-vswitchd", 0, chain, s, fn), "ovs-vswitchd;[user];do_syscall_64;tcp_sendmsg"; got != want {
		t.Errorf("kernel sample of a resolved process = %q, want %q", got, want)
	}
}

func TestParseSample(t *testing.T) {
	e := binary.NativeEndian
	b := make([]byte, 32+16)
	e.PutUint64(b[0:], 0xffffffff81003010)
	e.PutUint32(b[8:], 42)
	e.PutUint32(b[12:], 43)
	e.PutUint64(b[16:], 2003000)
	e.PutUint64(b[24:], 2)
	e.PutUint64(b[32:], uint64(0xffffffffffffff80))
	e.PutUint64(b[40:], 0xffffffff81003010)
	s, ok := parseSample(b)
	if !ok || s.pid != 42 || s.tid != 43 || s.period != 2003000 || len(s.chain) != 2 {
		t.Fatalf("parseSample = %+v, %v", s, ok)
	}
	e.PutUint64(b[24:], 1000) // nr beyond the record
	if _, ok := parseSample(b); ok {
		t.Error("a sample whose callchain overruns the record parsed")
	}
}

func TestReadAtWraps(t *testing.T) {
	data := []byte("0123456789")
	var buf []byte
	if got := string(readAt(data, 8, 4, &buf)); got != "8901" {
		t.Errorf("readAt across the end = %q, want 8901", got)
	}
}

func TestFoldedRoundTripAndBound(t *testing.T) {
	stacks := map[string]uint64{"a;b;c": 5, "a;b;d": 1, "a;e": 3, "a": 1}
	var w bytes.Buffer
	if err := WriteFolded(&w, stacks); err != nil {
		t.Fatal(err)
	}
	if got := strings.SplitN(w.String(), "\n", 2)[0]; got != "a;b;c 5" {
		t.Errorf("first folded line = %q, want the heaviest stack", got)
	}
	back, err := ParseFolded(&w)
	if err != nil || len(back) != 4 || back["a;e"] != 3 {
		t.Fatalf("ParseFolded = %v, %v", back, err)
	}
	total := func(m map[string]uint64) (n uint64) {
		for _, v := range m {
			n += v
		}
		return n
	}
	before := total(back)
	Bound(back, 12)
	if total(back) != before {
		t.Errorf("Bound lost samples: %d of %d left", total(back), before)
	}
	var w2 bytes.Buffer
	WriteFolded(&w2, back)
	if w2.Len() > 12 {
		t.Errorf("bounded text is %d bytes, want <= 12: %q", w2.Len(), w2.String())
	}
	if _, err := ParseFolded(strings.NewReader("a;b x\n")); err == nil {
		t.Error("a bad count parsed")
	}
}

func TestParseCPUList(t *testing.T) {
	got, err := parseCPUList("0-2,5")
	if err != nil || len(got) != 4 || got[3] != 5 {
		t.Errorf("parseCPUList = %v, %v", got, err)
	}
	for _, bad := range []string{"", "a", "3-1"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) accepted", bad)
		}
	}
}

func TestOptions(t *testing.T) {
	if _, err := (Options{Frequency: MaxFrequency + 1}).withDefaults(); err == nil {
		t.Error("a rate above the bound was accepted")
	}
	if _, err := (Options{Event: "instructions"}).withDefaults(); err == nil {
		t.Error("an unknown event was accepted")
	}
	if o, _ := (Options{}).withDefaults(); o.Frequency != DefaultFrequency {
		t.Errorf("default rate %d", o.Frequency)
	}
}

// TestPrivSample samples a busy loop of syscalls in this process and finds
// this test binary's comm and kernel frames in the stacks.
func TestPrivSample(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("system-wide perf events need root")
	}
	s, err := Open(Options{Event: EventCPUClock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	// Burn 400 ms of this process's CPU time (not wall time: on a loaded
	// host the loop may get a fraction of a CPU), at most 10 s.
	cpu := func() time.Duration {
		var ru unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0, deadline := cpu(), time.Now().Add(10*time.Second)
	for cpu()-c0 < 400*time.Millisecond && time.Now().Before(deadline) {
		unix.Getppid()
		f, _ := os.Open("/proc/self/stat")
		f.Close()
	}
	p, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	me := strings.TrimSpace(string(comm))
	var mine, kernel uint64
	for k, v := range p.Stacks {
		if strings.HasPrefix(k, me+";") {
			mine += v
			if strings.Contains(k, "do_syscall_64") {
				kernel += v
			}
		}
	}
	// 400 ms of CPU at 499 Hz is ~200 samples.
	if mine < 100 || kernel == 0 {
		t.Fatalf("%d samples of %s (%d in syscalls) of %d; stacks: %v", mine, me, kernel, p.Samples, p.Stacks)
	}
	// cpu-clock ticks on idle CPUs too: the periods add up to the window
	// times the CPUs.
	want := float64(p.WindowNs) / 1e9 * float64(p.CPUs)
	if sec, ok := p.CPUSeconds(); !ok || sec < 0.7*want || sec > 1.1*want {
		t.Errorf("cpu-clock periods sum to %v s over a %v s window on %d CPUs", sec, float64(p.WindowNs)/1e9, p.CPUs)
	}
	// A second window starts empty.
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	p2, _ := s.Stop()
	if p2.Samples > p.Samples/2 {
		t.Errorf("an idle 0 s window has %d samples: the first window's leaked", p2.Samples)
	}
}

// TestPrivPermission runs Check as an unprivileged user: with
// kernel.perf_event_paranoid above 0 it must be ErrPermission.
func TestPrivPermission(t *testing.T) {
	if os.Getenv("CNB_PROFILE_CHECK") == "1" {
		_, err := Check(Options{})
		if errors.Is(err, ErrPermission) {
			os.Stdout.WriteString("PERMISSION: " + err.Error() + "\n")
		} else {
			os.Stdout.WriteString("OTHER: " + errors.Join(err).Error() + "\n")
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a child as another user")
	}
	if p := paranoid(); p == "-1" || p == "0" {
		t.Skipf("kernel.perf_event_paranoid=%s lets any user sample system wide", p)
	}
	// The child runs as nobody, who cannot read go test's private build
	// directory: run a world-readable copy of this binary.
	dir, err := os.MkdirTemp("", "cnb-profile-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := dir + "/profile.test"
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	cmd := exec.Command(bin, "-test.run=^TestPrivPermission$")
	cmd.Env = append(os.Environ(), "CNB_PROFILE_CHECK=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("unprivileged Check: %s (%v)", out, err)
	if !strings.Contains(string(out), "PERMISSION: ") || !strings.Contains(string(out), "CAP_PERFMON") {
		t.Fatalf("unprivileged Check: %s", out)
	}
}
