package engine

import (
	"runtime"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/sysinfo"
	"golang.org/x/sys/unix"
)

// lockThread locks the calling goroutine to its thread until the test
// ends, giving the thread back with the CPUs it was allowed.
func lockThread(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = unix.SchedSetaffinity(0, &all)
		runtime.UnlockOSThread()
	})
}

// moveThread pins the calling (locked) thread to cpu.
func moveThread(t *testing.T, cpu int) {
	t.Helper()
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
}

// A sampler samples at its first tick, then once per period of work, and
// counts the CPU its thread is on: here each CPU the thread is moved to.
func TestSamplerCountsItsThreadsCPU(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	p := newPlacement(sysinfo.Host, result.TCPLat, 1)
	w := p.samplers[0]
	a := p.snap()
	lockThread(t)
	moveThread(t, 1)
	for range 10 * sampleTxns {
		w.tick(1)
	}
	moveThread(t, 0)
	for range 30 * sampleTxns {
		w.tick(1)
	}
	b := p.snap()
	got, why := ranOn(a, b)
	want := []result.CPUShare{{CPU: 0, Pct: 75}, {CPU: 1, Pct: 25}}
	if why != "" || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ran on %v (%q), want %v", got, why, want)
	}
	// A tcp_bw loop feeds bytes: one sample per sampleBytes.
	bw := newPlacement(sysinfo.Host, result.TCPBW, 1)
	for range 8 {
		bw.samplers[0].tick(sampleBytes / 2)
	}
	if n := bw.snap().counts[0]; n != 4 {
		t.Errorf("8 half periods of bytes on cpu 0 gave %d samples there, want 4", n)
	}
}

func TestSamplerTickAllocatesNothing(t *testing.T) {
	w := newPlacement(sysinfo.Host, result.TCPLat, 1).samplers[0]
	if n := testing.AllocsPerRun(10*sampleTxns, func() { w.tick(1) }); n != 0 {
		t.Fatalf("tick allocates %v times per call", n)
	}
}

// ranOn's shares and the reasons it gives none.
func TestRanOn(t *testing.T) {
	snap := func(c ...uint64) ranSnap { return ranSnap{counts: c} }
	got, why := ranOn(snap(5, 0, 10, 2), snap(5, 3, 19, 5))
	want := []result.CPUShare{{CPU: 2, Pct: 60}, {CPU: 1, Pct: 20}, {CPU: 3, Pct: 20}}
	if why != "" || len(got) != len(want) {
		t.Fatalf("got %v (%q), want %v", got, why, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("share %d: %v, want %v (largest first, ties by CPU number)", i, got[i], want[i])
		}
	}
	for _, tc := range []struct {
		name string
		a, b ranSnap
		want string
	}{
		{"no sample in the interval", snap(4, 4), snap(4, 4), "no placement sample in the measured interval"},
		{"getcpu failed", snap(0), ranSnap{counts: []uint64{1}, errno: unix.ENOSYS}, "getcpu failed: function not implemented"},
		{"a cpu past the counts", snap(0, 0), ranSnap{counts: []uint64{1, 0}, beyond: 1, cpusErr: errString("read possible cpus: no such file")},
			"a thread ran on a CPU numbered 2 or above (read possible cpus: no such file)"},
		{"no loop sampled", ranSnap{}, ranSnap{}, "no loop of this side was sampled"},
	} {
		if got, why := ranOn(tc.a, tc.b); got != nil || !strings.HasPrefix(why, tc.want) {
			t.Errorf("%s: %v, %q; want nil and %q", tc.name, got, why, tc.want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
