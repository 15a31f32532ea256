package sysinfo

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStatDelta(t *testing.T) {
	fs := Root("testdata/host1")
	a, err := fs.ReadStat()
	if err != nil {
		t.Fatal(err)
	}
	b2, err := os.ReadFile(filepath.Join(fs.Proc, "stat.after"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseStat(b2)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.PerCPU) != 2 || a.Total.Softirq != 200 || a.PerCPU[1].Idle != 4200 {
		t.Fatalf("parsed %+v", a)
	}
	d, err := DeltaStat(a, b)
	if err != nil {
		t.Fatal(err)
	}
	// total moved 300 user + 200 system + 600 idle + 200 softirq = 1300 ticks
	want := Split{User: 300.0 / 13, System: 200.0 / 13, Idle: 600.0 / 13, Softirq: 200.0 / 13}
	if !near(d.Total, want) {
		t.Errorf("total split %+v, want %+v", d.Total, want)
	}
	// cpu0's user went backwards (hotplug): counted as no time, and no ticks
	// elapsed otherwise, so cpu0 has no split.
	if _, ok := d.PerCPU[0]; ok {
		t.Errorf("cpu0 split reported for an interval with no ticks: %+v", d.PerCPU[0])
	}
	if s := d.PerCPU[1]; math.Abs(s.Softirq-200.0/13) > 1e-9 || math.Abs(s.User+s.System+s.Idle+s.Softirq-100) > 1e-9 {
		t.Errorf("cpu1 split %+v", s)
	}
	if _, err := DeltaStat(a, a); err == nil {
		t.Error("zero interval gave a split")
	}
}

func near(a, b Split) bool {
	return math.Abs(a.User-b.User) < 1e-9 && math.Abs(a.System-b.System) < 1e-9 &&
		math.Abs(a.Idle-b.Idle) < 1e-9 && math.Abs(a.Softirq-b.Softirq) < 1e-9 &&
		a.Irq == b.Irq && a.Steal == b.Steal && a.Iowait == b.Iowait
}

func TestStatErrors(t *testing.T) {
	if _, err := Root("testdata/host2").ReadStat(); err == nil || !strings.Contains(err.Error(), "fields") {
		t.Errorf("short line: %v", err)
	}
	if _, err := parseStat([]byte("cpu0 1 2 3 4 5 6 7 8\n")); err == nil {
		t.Error("no aggregate line accepted")
	}
	if _, err := parseStat([]byte("cpu 1 2 3 x 5 6 7 8\n")); err == nil {
		t.Error("non-numeric field accepted")
	}
	if _, err := Root("testdata/nope").ReadStat(); err == nil {
		t.Error("missing file accepted")
	}
}

func TestUDP(t *testing.T) {
	c, err := Root("testdata/host1").ReadUDP()
	if err != nil {
		t.Fatal(err)
	}
	if c["InDatagrams"] != 685828 || c["RcvbufErrors"] != 214280 || c["NoPorts"] != 3 || len(c) != 9 {
		t.Fatalf("udp counters %v", c)
	}
	later := UDPCounters{"InDatagrams": 685900, "RcvbufErrors": 214290}
	d := later.Sub(c)
	if d["InDatagrams"] != 72 || d["RcvbufErrors"] != 10 || len(d) != 2 {
		t.Errorf("sub %v", d)
	}
	if _, err := parseSNMP([]byte("Udp: A B\nUdp: 1\n"), "Udp:"); err == nil {
		t.Error("short values accepted")
	}
	if _, err := Root("testdata/host2").ReadUDP(); err == nil {
		t.Error("missing snmp accepted")
	}
}

func TestFingerprint(t *testing.T) {
	f := Root("testdata/host1").Fingerprint("v1.2")
	if f.Distro != "Debian GNU/Linux 12 (bookworm)" || f.CPUModel != "AMD EPYC 7B13" || f.Cores != 2 ||
		f.Governor != "performance" || f.Cnibench != "v1.2" || f.Kernel == "" {
		t.Errorf("fingerprint %+v", f)
	}
	if len(f.NICDrivers) != 1 || f.NICDrivers["eth0"] != "virtio_net" {
		t.Errorf("nic drivers %v", f.NICDrivers)
	}
	if f.Notes != nil {
		t.Errorf("notes on a complete fixture: %v", f.Notes)
	}
	g := Root("testdata/host2").Fingerprint("v")
	if g.Governor != "" || g.Notes["governor"] != "no cpufreq" || g.Notes["distro"] == "" || g.NICDrivers != nil {
		t.Errorf("host2 fingerprint %+v", g)
	}
}

func TestProcessCPU(t *testing.T) {
	u0, s0, err := ProcessCPU()
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := 0; i < 20_000_000; i++ { // burn a little user time
		x += i
	}
	u1, s1, _ := ProcessCPU()
	if u1 <= u0 && x != 0 || s1 < s0 {
		t.Errorf("rusage did not move: %v %v -> %v %v", u0, s0, u1, s1)
	}
}

func TestPossibleCPUs(t *testing.T) {
	if n, err := Root("testdata/host1").PossibleCPUs(); err != nil || n != 2 {
		t.Errorf("host1: %d, %v; want 2", n, err)
	}
	if _, err := Root("testdata/nope").PossibleCPUs(); err == nil {
		t.Error("missing file accepted")
	}
	for in, want := range map[string]int{"0": 1, "0-1\n": 2, "0-3,8-11": 12, "4,0-1": 5} {
		if n, err := parseCPUList(in); err != nil || n != want {
			t.Errorf("%q: %d, %v; want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"", "x", "3-1", "0-", "-1", "0,,1"} {
		if n, err := parseCPUList(in); err == nil {
			t.Errorf("%q accepted as %d", in, n)
		}
	}
}
