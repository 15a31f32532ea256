package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
)

// DatapathMeter measures a lab's userspace datapath daemon over a window:
// the on-CPU time of each of its threads (the PMD threads apart) from
// /proc/<pid>/task/*/schedstat, in nanoseconds, and the PMDs' busy and idle
// cycles from OVS's own counters. The engine's CPU figures cover only the
// client and server processes; on OVS-DPDK the switching happens in
// another process, which is what this makes visible.
type DatapathMeter struct {
	pid     int
	ctl     string   // ovs-appctl -t target
	env     []string // for ovs-appctl
	t0      time.Time
	all0    int64
	pmd0    map[int]int64
	cleared error // why the PMD counters could not be reset at Start
}

// DatapathMeter returns the meter of the lab's datapath daemon, or nil when
// no daemon of its datapath is measured (the kernel's datapaths) or the
// daemon is not running.
func (l *Lab) DatapathMeter() *DatapathMeter {
	t, err := lookupTopology(l.Preset)
	if err != nil {
		return nil // a state file of a preset this binary does not know
	}
	return t.meter(l)
}

// notMetered is the meter of a topology whose datapath has no daemon
// measured.
func notMetered(*Lab) *DatapathMeter { return nil }

// privateVswitchdMeter meters the lab's own ovs-vswitchd (ovs-dpdk's),
// PMD threads included.
func privateVswitchdMeter(l *Lab) *DatapathMeter {
	if len(l.PrivateOVS) == 0 {
		return nil
	}
	dir := l.PrivateOVS[0]
	pid, err := readPID(filepath.Join(dir, "ovs-vswitchd.pid"))
	if err != nil || !procAlive(pid) {
		return nil
	}
	o := privOVS{dir: dir}
	return &DatapathMeter{pid: pid, ctl: unixctl(dir), env: o.env()}
}

// hostVswitchdMeter meters the host's ovs-vswitchd, which switches an
// ovs-netdev lab's bridge; it has no PMD (those figures come out missing),
// and it serves whatever other bridges the host has too, whose traffic it
// would count.
func hostVswitchdMeter(*Lab) *DatapathMeter {
	pid, err := readPID(filepath.Join(ovsRunDir, "ovs-vswitchd.pid"))
	if err != nil || !procAlive(pid) {
		return nil
	}
	return &DatapathMeter{pid: pid, ctl: filepath.Join(ovsRunDir, fmt.Sprintf("ovs-vswitchd.%d.ctl", pid))}
}

// readPID reads the process id a daemon wrote to its pid file p.
func readPID(p string) (int, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s: %q", p, b)
	}
	return pid, nil
}

// threadTimes returns each thread's on-CPU nanoseconds and whether it is a
// PMD thread (OVS names them pmd-c<core>/id:<n>).
func threadTimes(pid int) (total int64, pmd map[int]int64, err error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, err := procIDs(dir)
	if err != nil {
		return 0, nil, err
	}
	pmd = map[int]int64{}
	for _, tid := range tids {
		task := filepath.Join(dir, strconv.Itoa(tid))
		b, err := os.ReadFile(filepath.Join(task, "schedstat"))
		if err != nil {
			continue // the thread ended between the listing and the read
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("schedstat of thread %d: %q", tid, b)
		}
		total += ns
		if comm, err := os.ReadFile(filepath.Join(task, "comm")); err == nil && strings.HasPrefix(string(comm), "pmd") {
			pmd[tid] = ns
		}
	}
	return total, pmd, nil
}

// Start opens the window: thread times now, PMD counters reset.
func (m *DatapathMeter) Start(ctx context.Context) error {
	all, pmd, err := threadTimes(m.pid)
	if err != nil {
		return fmt.Errorf("ovs-vswitchd (pid %d) threads: %w", m.pid, err)
	}
	m.t0, m.all0, m.pmd0 = time.Now(), all, pmd
	_, m.cleared = run(ctx, "", m.env, "ovs-appctl", "--timeout=5", "-t", m.ctl, "dpif-netdev/pmd-stats-clear")
	return nil
}

// Stop closes the window. Figures that could not be read are nil, with
// the reason in missing (keys relative to cpu.datapath).
func (m *DatapathMeter) Stop(ctx context.Context) (*result.DatapathCPU, map[string]string) {
	missing := map[string]string{}
	wall := time.Since(m.t0).Seconds()
	d := &result.DatapathCPU{Process: "ovs-vswitchd"}
	all, pmd, err := threadTimes(m.pid)
	if err != nil {
		for _, f := range []string{"seconds", "pct", "pmd_seconds", "pmd_pct"} {
			missing[f] = fmt.Sprintf("ovs-vswitchd (pid %d) threads: %v", m.pid, err)
		}
	} else {
		sec := float64(all-m.all0) / 1e9
		var p int64
		for tid, ns := range pmd {
			p += ns - m.pmd0[tid]
		}
		d.Seconds, d.Pct = result.F(sec), result.F(100*sec/wall)
		if len(pmd) > 0 {
			ps := float64(p) / 1e9
			d.PMDSeconds, d.PMDPct = result.F(ps), result.F(100*ps/wall)
		} else {
			missing["pmd_seconds"], missing["pmd_pct"] = "no PMD thread found", "no PMD thread found"
		}
	}
	switch {
	case m.cleared != nil:
		missing["pmd_busy_pct"] = "pmd-stats-clear: " + m.cleared.Error()
	default:
		out, err := run(ctx, "", m.env, "ovs-appctl", "--timeout=5", "-t", m.ctl, "dpif-netdev/pmd-stats-show")
		if err != nil {
			missing["pmd_busy_pct"] = "pmd-stats-show: " + err.Error()
			break
		}
		busy, err := parsePMDBusy(out)
		if err != nil {
			missing["pmd_busy_pct"] = err.Error()
			break
		}
		d.PMDBusyPct = result.F(busy)
	}
	return d, missing
}

// errNoPMDCycles: pmd-stats-show named no PMD thread with cycle counts.
var errNoPMDCycles = errors.New("pmd-stats-show: no PMD thread with cycle counts")

// parsePMDBusy sums the PMD threads' "processing cycles" and "idle cycles"
// in `ovs-appctl dpif-netdev/pmd-stats-show` output (the main thread,
// which polls no DPDK queue, is left out) and returns processing over both
// in percent.
func parsePMDBusy(out string) (float64, error) {
	var idle, proc int64
	inPMD, seen := false, false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		ln := sc.Text()
		if !strings.HasPrefix(ln, " ") && !strings.HasPrefix(ln, "\t") {
			inPMD = strings.HasPrefix(ln, "pmd thread")
			continue
		}
		if !inPMD {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(ln), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "idle cycles":
			idle += n
			seen = true
		case "processing cycles":
			proc += n
			seen = true
		}
	}
	if !seen {
		return 0, errNoPMDCycles
	}
	if idle+proc == 0 {
		return 0, fmt.Errorf("pmd-stats-show: no cycles counted in the window")
	}
	return 100 * float64(proc) / float64(idle+proc), nil
}
