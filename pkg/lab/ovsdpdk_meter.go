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
	"github.com/cnibench/cnibench/pkg/runid"
)

// DatapathMeter measures a lab's userspace datapath daemons over a window
// — the lab's ovs-vswitchd, or each node's on a two-node lab — : the
// on-CPU time of each of their threads (the PMD threads apart) from
// /proc/<pid>/task/*/schedstat, in nanoseconds, and the PMDs' busy and
// idle cycles from OVS's own counters. The engine's CPU figures cover only
// the client and server processes; on a userspace datapath the switching
// happens in other processes, which is what this makes visible.
type DatapathMeter struct {
	daemons []meteredDaemon
	env     []string // for ovs-appctl
	t0      time.Time
	cleared error // why the PMD counters could not be reset at Start
}

// meteredDaemon is one vswitchd a meter reads, and its figures at Start.
type meteredDaemon struct {
	where string // "node1", or "" on a one-switch lab
	pid   int
	ctl   string // ovs-appctl -t target
	all0  int64
	pmd0  map[int]int64
}

// DatapathMeter returns the meter of the lab's datapath daemons, or nil
// when no daemon of its datapath is measured (the kernel's datapaths) or
// none is running.
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

// privateVswitchdMeter meters the lab's own ovs-vswitchds, PMD threads
// included: ovs-dpdk's one, and one per node of the two-node presets,
// summed (the figures a run reports), each node's time apart in agents.
func privateVswitchdMeter(l *Lab) *DatapathMeter {
	m := &DatapathMeter{}
	for _, dir := range l.PrivateOVS {
		pid, err := readPID(filepath.Join(dir, "ovs-vswitchd.pid"))
		if err != nil || !procAlive(pid) {
			continue // a directory without a switch (OVN's central one)
		}
		// The lab starts its vswitchds with a fixed control socket;
		// ovs-netdev-geneve's use OVS's default name in their directory.
		ctl := unixctl(dir)
		if _, err := os.Stat(ctl); err != nil {
			ctl = filepath.Join(dir, fmt.Sprintf("ovs-vswitchd.%d.ctl", pid))
		}
		m.daemons = append(m.daemons, meteredDaemon{where: strings.TrimPrefix(filepath.Base(dir), runid.Prefix+l.ID+"-"), pid: pid, ctl: ctl})
		m.env = privOVS{dir: dir}.env()
	}
	if len(m.daemons) == 0 {
		return nil
	}
	if len(m.daemons) == 1 {
		m.daemons[0].where = ""
	}
	return m
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
	return &DatapathMeter{daemons: []meteredDaemon{{pid: pid, ctl: filepath.Join(ovsRunDir, fmt.Sprintf("ovs-vswitchd.%d.ctl", pid))}}}
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
	m.cleared = nil
	for i := range m.daemons {
		d := &m.daemons[i]
		all, pmd, err := threadTimes(d.pid)
		if err != nil {
			return fmt.Errorf("ovs-vswitchd %s(pid %d) threads: %w", d.label(), d.pid, err)
		}
		d.all0, d.pmd0 = all, pmd
	}
	m.t0 = time.Now()
	for _, d := range m.daemons {
		if _, err := run(ctx, "", m.env, "ovs-appctl", "--timeout=5", "-t", d.ctl, "dpif-netdev/pmd-stats-clear"); err != nil {
			m.cleared = err
		}
	}
	return nil
}

func (d meteredDaemon) label() string {
	if d.where == "" {
		return ""
	}
	return "of " + d.where + " "
}

// Stop closes the window. Figures that could not be read are nil, with
// the reason in missing (keys relative to cpu.datapath).
func (m *DatapathMeter) Stop(ctx context.Context) (*result.DatapathCPU, map[string]string) {
	missing := map[string]string{}
	wall := time.Since(m.t0).Seconds()
	d := &result.DatapathCPU{Process: "ovs-vswitchd"}
	if len(m.daemons) > 1 {
		var where []string
		for _, x := range m.daemons {
			where = append(where, x.where)
		}
		d.Process = "ovs-vswitchd of " + strings.Join(where, ", ")
	}
	var sec, pmdSec float64
	pmds := 0
	for _, x := range m.daemons {
		all, pmd, err := threadTimes(x.pid)
		if err != nil {
			why := fmt.Sprintf("ovs-vswitchd %s(pid %d) threads: %v", x.label(), x.pid, err)
			for _, f := range []string{"seconds", "pct", "pmd_seconds", "pmd_pct"} {
				missing[f] = why
			}
			break
		}
		s := float64(all-x.all0) / 1e9
		sec += s
		for tid, ns := range pmd {
			pmdSec += float64(ns-x.pmd0[tid]) / 1e9
		}
		pmds += len(pmd)
		if x.where != "" {
			d.Agents = append(d.Agents, result.AgentCPU{Node: x.where, Process: "ovs-vswitchd", PIDs: []int{x.pid},
				Seconds: result.F(s), Pct: result.F(100 * s / wall)})
		}
	}
	if _, failed := missing["seconds"]; !failed {
		d.Seconds, d.Pct = result.F(sec), result.F(100*sec/wall)
		if pmds > 0 {
			d.PMDSeconds, d.PMDPct = result.F(pmdSec), result.F(100*pmdSec/wall)
		} else {
			missing["pmd_seconds"], missing["pmd_pct"] = "no PMD thread found", "no PMD thread found"
		}
	} else {
		d.Agents = nil
	}
	if m.cleared != nil {
		missing["pmd_busy_pct"] = "pmd-stats-clear: " + m.cleared.Error()
		return d, missing
	}
	var busy, total int64
	for _, x := range m.daemons {
		out, err := run(ctx, "", m.env, "ovs-appctl", "--timeout=5", "-t", x.ctl, "dpif-netdev/pmd-stats-show")
		if err != nil {
			missing["pmd_busy_pct"] = "pmd-stats-show: " + err.Error()
			return d, missing
		}
		p, t, err := parsePMDCycles(out)
		if err != nil {
			missing["pmd_busy_pct"] = err.Error()
			return d, missing
		}
		busy, total = busy+p, total+t
	}
	if total == 0 {
		missing["pmd_busy_pct"] = "pmd-stats-show: no cycles counted in the window"
		return d, missing
	}
	d.PMDBusyPct = result.F(100 * float64(busy) / float64(total))
	return d, missing
}

// errNoPMDCycles: pmd-stats-show named no PMD thread with cycle counts.
var errNoPMDCycles = errors.New("pmd-stats-show: no PMD thread with cycle counts")

// parsePMDBusy sums the PMD threads' "processing cycles" and "idle cycles"
// in `ovs-appctl dpif-netdev/pmd-stats-show` output (the main thread,
// which polls no DPDK queue, is left out) and returns processing over both
// in percent.
func parsePMDBusy(out string) (float64, error) {
	proc, total, err := parsePMDCycles(out)
	if err != nil {
		return 0, err
	}
	if total == 0 {
		return 0, fmt.Errorf("pmd-stats-show: no cycles counted in the window")
	}
	return 100 * float64(proc) / float64(total), nil
}

// parsePMDCycles returns the PMD threads' processing cycles and their
// processing and idle cycles together.
func parsePMDCycles(out string) (proc, total int64, err error) {
	var idle int64
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
		return 0, 0, errNoPMDCycles
	}
	return proc, proc + idle, nil
}
