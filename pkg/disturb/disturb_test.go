package disturb

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/fixture"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/sysinfo"
)

// writeProc lays out a fixture /proc: a stat file, a loadavg and one stat
// line per process (comm, flags, utime, stime).
func writeProc(t *testing.T, root string, steal uint64, procs map[int][4]string) {
	t.Helper()
	files := map[string]string{
		"proc/stat":    fmt.Sprintf("cpu  100 0 100 %d 0 0 0 %d 0 0\ncpu0 100 0 100 %d 0 0 0 %d 0 0\n", 1000+steal*10, steal, 1000+steal*10, steal),
		"proc/loadavg": "2.50 1.00 0.50 3/400 1234\n",
	}
	for pid, f := range procs {
		// Fields 3..15: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime.
		files[fmt.Sprintf("proc/%d/stat", pid)] =
			fmt.Sprintf("%d (%s) S 1 1 1 0 -1 %s 0 0 0 0 %s %s 0 0 20 0 1 0\n", pid, f[0], f[1], f[2], f[3])
	}
	fixture.Write(t, root, files)
}

func TestStamp(t *testing.T) {
	root := t.TempDir()
	fs := sysinfo.Root(root)
	writeProc(t, root, 0, map[int][4]string{
		10: {"go build (x)", "0", "100", "50"},   // comm with a space and a ')'
		11: {"kworker/0:1", "2097216", "0", "0"}, // PF_KTHREAD: part of the datapath
		12: {"cnibench", "0", "0", "0"},
		13: {"backup", "0", "10", "0"},
		15: {"cnibench-h", "0", "0", "0"}, // cnibench copied under another name: itself
	})
	clock := time.Unix(1000, 0)
	m := &Meter{fs: fs, now: func() time.Time { return clock }, self: "cnibench-h"}
	m.spin()
	mk := m.Begin()
	if len(mk.procs) != 2 {
		t.Fatalf("others at begin: %+v (want the two unrelated processes)", mk.procs)
	}
	writeProc(t, root, 50, map[int][4]string{
		10: {"go build (x)", "0", "130", "60"}, // +40 ticks = 0.4 s
		11: {"kworker/0:1", "2097216", "500", "0"},
		12: {"cnibench", "0", "900", "0"},
		13: {"backup", "0", "15", "0"},   // +5
		14: {"newcomer", "0", "35", "0"}, // born during the step: all 35 ticks count
		15: {"cnibench-h", "0", "700", "0"},
	})
	clock = clock.Add(2 * time.Second)
	d := m.End(mk)
	if d.OthersCPUPct != 40 { // 40+5+35 ticks = 0.8 s over 2 s
		t.Errorf("others %.2f%%, want 40", d.OthersCPUPct)
	}
	if d.Busiest != "go build (x)" || d.Load1 != 2.5 {
		t.Errorf("busiest %q load %v", d.Busiest, d.Load1)
	}
	if d.StealPct <= MaxStealPct || !d.Disturbed || len(d.Why) < 2 {
		t.Errorf("stamp %+v: want steal and others named", d)
	}
	if !strings.Contains(strings.Join(d.Why, ";"), "most: go build (x)") {
		t.Errorf("why %v", d.Why)
	}
}

func TestJudgeAndSummary(t *testing.T) {
	quiet := &result.Disturbance{StealPct: 0.2, OthersCPUPct: 3, SpinSlowdown: 1.05}
	Judge(quiet)
	if quiet.Disturbed || quiet.Why != nil {
		t.Errorf("quiet judged disturbed: %+v", quiet)
	}
	spin := &result.Disturbance{SpinSlowdown: 1.6}
	Judge(spin)
	others := &result.Disturbance{OthersCPUPct: 40, Busiest: "cc1"}
	Judge(others)
	both := &result.Disturbance{OthersCPUPct: 11, SpinSlowdown: 2}
	Judge(both)
	n, why := Summary([]*result.Disturbance{quiet, spin, others, both, nil})
	if n != 3 || strings.Join(why, "; ") != "other processes (2); spin loop (2)" {
		t.Errorf("Summary = %d %v", n, why)
	}
}

// The meter knows itself by the name it runs under, not by "cnibench".
func TestSelfComm(t *testing.T) {
	if got := selfComm(); got != "disturb.test" {
		t.Errorf("selfComm() = %q, want this test binary's name disturb.test", got)
	}
}
