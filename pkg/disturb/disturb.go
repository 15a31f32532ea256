// Package disturb stamps each measured step with what else the machine did
// meanwhile: steal time, the CPU of processes that are not part of the
// measurement, the load, and how much slower a fixed spin loop ran than it
// can. A sample taken while a compiler, a backup or another VM took the CPU
// is then visible as such in the report instead of widening an interval
// without a trace.
package disturb

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/sysinfo"
)

// Thresholds above which a step is disturbed. Others' CPU: a tenth of a CPU
// taken by an unrelated process is already comparable to a latency test's
// own CPU; steal: the report's [steal] flag uses the same 1 %; the spin loop
// is noisy by itself at the few-percent level, so only a quarter counts.
const (
	MaxOthersCPUPct = 10
	MaxStealPct     = 1
	MaxSpinSlowdown = 1.25
)

// Measured lists the process names that are part of a measurement: the
// engine and the reference tools, Open vSwitch's daemons, the wake-up
// spinner. Kernel threads (ksoftirqd, kworker, …) carry the datapath's
// deferred work and count as part of it too.
var Measured = map[string]bool{
	"cnibench": true, "qperf": true, "iperf3": true, "sockperf": true, "netperf": true, "netserver": true,
	"ovs-vswitchd": true, "ovsdb-server": true, "cnb-spin": true,
	// The ovs-dpdk lab's switch: ovs-vswitchd-dpdk, cut to comm's 15 bytes.
	"ovs-vswitchd-dp": true,
}

// Meter takes the stamps. Its zero value is not useful: use New.
type Meter struct {
	fs sysinfo.FS
	// self is this program's own name (comm): a copy of cnibench under
	// another name (cnibench-h, a test binary) runs its servers and
	// clients under that name, and they are the measurement, not others.
	self     string
	bestSpin time.Duration
	now      func() time.Time // time.Now; a fixture clock in tests
}

// New returns a meter reading fs (sysinfo.Host on a real machine) and runs
// the spin loop a few times to know how fast it can be.
func New(fs sysinfo.FS) *Meter {
	m := &Meter{fs: fs, now: time.Now, self: selfComm()}
	for i := 0; i < 5; i++ {
		m.spin()
	}
	return m
}

// Mark is the state at the start of a step.
type Mark struct {
	stat  *sysinfo.Stat
	procs map[int]proc
	at    time.Time
}

type proc struct {
	comm string
	// ticks is utime + stime + cutime + cstime: the children it reaped
	// count, so a build's short-lived compilers (born and gone within one
	// step, never seen by a scan) are charged to the build tool.
	ticks uint64
}

// Begin reads the counters a step's stamp is the difference of.
func (m *Meter) Begin() *Mark {
	st, _ := m.fs.ReadStat()
	return &Mark{stat: st, procs: m.others(), at: m.now()}
}

// End stamps the step that began at mk.
func (m *Meter) End(mk *Mark) *result.Disturbance {
	d := &result.Disturbance{}
	wall := m.now().Sub(mk.at).Seconds()
	if st, err := m.fs.ReadStat(); err == nil && mk.stat != nil {
		if dl, err := sysinfo.DeltaStat(mk.stat, st); err == nil {
			d.StealPct = dl.Total.Steal
		}
	}
	now := m.others()
	byComm := map[string]uint64{}
	var total uint64
	for pid, p := range now {
		before, ok := mk.procs[pid]
		if ok && (before.comm != p.comm || p.ticks < before.ticks) {
			ok = false // the pid was reused
		}
		dt := p.ticks // born during the step: all its time was spent in it
		if ok {
			dt -= before.ticks
		}
		total += dt
		byComm[p.comm] += dt
	}
	if wall > 0 {
		d.OthersCPUPct = 100 * float64(total) / float64(clkTck) / wall
	}
	var most uint64
	for c, t := range byComm {
		if t > most || (t == most && c < d.Busiest) {
			d.Busiest, most = c, t
		}
	}
	if b, err := os.ReadFile(filepath.Join(m.fs.Proc, "loadavg")); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			d.Load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	// The best of three: one interrupt is not a disturbed machine, a CPU
	// taken by another task for the whole 3 ms is.
	t := min(m.spin(), m.spin(), m.spin())
	if m.bestSpin > 0 {
		d.SpinSlowdown = float64(t) / float64(m.bestSpin)
	}
	Judge(d)
	return d
}

// Start begins a step's stamp; the function it returns ends it.
func (m *Meter) Start() func() *result.Disturbance {
	mk := m.Begin()
	return func() *result.Disturbance { return m.End(mk) }
}

// Judge sets Disturbed and Why from the figures.
func Judge(d *result.Disturbance) {
	d.Why = nil
	if d.StealPct > MaxStealPct {
		d.Why = append(d.Why, fmt.Sprintf("steal %.1f%%", d.StealPct))
	}
	if d.OthersCPUPct > MaxOthersCPUPct {
		w := fmt.Sprintf("other processes %.0f%% CPU", d.OthersCPUPct)
		if d.Busiest != "" {
			w += " (most: " + d.Busiest + ")"
		}
		d.Why = append(d.Why, w)
	}
	if d.SpinSlowdown > MaxSpinSlowdown {
		d.Why = append(d.Why, fmt.Sprintf("spin loop ×%.2f slower", d.SpinSlowdown))
	}
	d.Disturbed = len(d.Why) > 0
}

// clkTck is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux
// architecture cnibench builds for.
const clkTck = 100

// others reads every process that is not part of the measurement.
func (m *Meter) others() map[int]proc {
	out := map[int]proc{}
	ents, err := os.ReadDir(m.fs.Proc)
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.fs.Proc, e.Name(), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		p, kthread, ok := parseStat(b)
		if !ok || kthread || Measured[p.comm] || p.comm == m.self {
			continue
		}
		out[pid] = p
	}
	return out
}

// selfComm is this process's comm, as /proc/PID/stat shows it to others.
func selfComm() string {
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// pfKthread is PF_KTHREAD in the flags field of /proc/PID/stat.
const pfKthread = 0x00200000

// parseStat reads comm, flags, utime, stime, cutime and cstime from one
// /proc/PID/stat line.
// comm is in parentheses and may itself hold spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStat(b []byte) (p proc, kthread, ok bool) {
	open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return p, false, false
	}
	p.comm = string(b[open+1 : closing])
	f := strings.Fields(string(b[closing+1:]))
	// f[0] is field 3 (state): flags is field 9, utime 14, stime 15,
	// cutime 16, cstime 17 (the last two signed in the kernel's format).
	if len(f) < 15 {
		return p, false, false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		return p, false, false
	}
	for _, i := range []int{11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || v < 0 {
			return p, false, false
		}
		p.ticks += uint64(v)
	}
	return p, flags&pfKthread != 0, true
}

// spin times a fixed amount of arithmetic (~1 ms here) and keeps the best.
func (m *Meter) spin() time.Duration {
	start := time.Now()
	x := uint64(88172645463325252)
	for i := 0; i < 400000; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink = x
	d := time.Since(start)
	if m.bestSpin == 0 || d < m.bestSpin {
		m.bestSpin = d
	}
	return d
}

var sink uint64

// Summary counts the disturbed samples of a set and names their reasons,
// most frequent first, for a report's note.
func Summary(ds []*result.Disturbance) (disturbed int, reasons []string) {
	count := map[string]int{}
	for _, d := range ds {
		if d == nil || !d.Disturbed {
			continue
		}
		disturbed++
		for _, w := range d.Why {
			k := w
			if i := strings.IndexAny(w, "0123456789×"); i > 0 {
				k = strings.TrimSpace(w[:i])
			}
			count[k]++
		}
	}
	reasons = slices.SortedFunc(maps.Keys(count), func(a, b string) int {
		return cmp.Or(cmp.Compare(count[b], count[a]), strings.Compare(a, b))
	})
	for i, k := range reasons {
		reasons[i] = fmt.Sprintf("%s (%d)", k, count[k])
	}
	return disturbed, reasons
}
