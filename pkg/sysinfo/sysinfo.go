// Package sysinfo reads the host facts a measurement needs: the CPU time
// split from /proc/stat, the kernel's UDP counters from /proc/net/snmp, the
// process's own CPU time, and a fingerprint of the host.
//
// Every path into /proc, /sys and /etc goes through an FS root, so tests run
// on fixture trees in testdata/ without root and without this host's values.
package sysinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FS locates the pseudo-filesystems. The zero value is not useful; use Host
// or a fixture root.
type FS struct {
	Proc string // usually /proc
	Sys  string // usually /sys
	Etc  string // usually /etc (for os-release)
}

// Host is the running machine's FS.
var Host = FS{Proc: "/proc", Sys: "/sys", Etc: "/etc"}

// Root returns an FS whose proc, sys and etc live under dir, the layout of
// the fixtures in testdata/.
func Root(dir string) FS {
	return FS{Proc: filepath.Join(dir, "proc"), Sys: filepath.Join(dir, "sys"), Etc: filepath.Join(dir, "etc")}
}

// CPUTimes is one line of /proc/stat, in USER_HZ ticks.
type CPUTimes struct {
	User, Nice, System, Idle, Iowait, Irq, Softirq, Steal uint64
}

func (c CPUTimes) total() uint64 {
	return c.User + c.Nice + c.System + c.Idle + c.Iowait + c.Irq + c.Softirq + c.Steal
}

// Stat is a snapshot of /proc/stat: the all-CPU line and each CPU's line,
// keyed by CPU number (CPUs can be offline, so numbers may have gaps).
type Stat struct {
	Total  CPUTimes
	PerCPU map[int]CPUTimes
}

// ReadStat parses <proc>/stat.
func (fs FS) ReadStat() (*Stat, error) {
	b, err := os.ReadFile(filepath.Join(fs.Proc, "stat"))
	if err != nil {
		return nil, fmt.Errorf("read cpu stat: %w", err)
	}
	return parseStat(b)
}

func parseStat(b []byte) (*Stat, error) {
	s := &Stat{PerCPU: map[int]CPUTimes{}}
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024) // the intr line is long
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if len(f) < 9 {
			return nil, fmt.Errorf("parse cpu stat: line %q has %d fields, want at least 9", f[0], len(f))
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parse cpu stat: %s field %d: %w", f[0], i+1, err)
			}
			v[i] = n
		}
		t := CPUTimes{User: v[0], Nice: v[1], System: v[2], Idle: v[3], Iowait: v[4], Irq: v[5], Softirq: v[6], Steal: v[7]}
		if f[0] == "cpu" {
			s.Total = t
			found = true
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		if err != nil {
			return nil, fmt.Errorf("parse cpu stat: bad cpu name %q", f[0])
		}
		s.PerCPU[n] = t
	}
	if !found {
		return nil, errors.New("parse cpu stat: no aggregate \"cpu\" line")
	}
	return s, nil
}

// Split is the share of CPU time spent in each state over an interval, in
// percent; the fields sum to ~100. User includes nice.
type Split struct {
	User, System, Softirq, Irq, Idle, Iowait, Steal float64
}

// SplitOf returns the split between two snapshots of one CPU line, and false
// when no ticks elapsed (too short an interval to say anything).
func SplitOf(a, b CPUTimes) (Split, bool) {
	d := func(x, y uint64) float64 {
		if y < x { // a counter went backwards (CPU hotplug); treat as no time
			return 0
		}
		return float64(y - x)
	}
	tot := d(a.total(), b.total())
	if tot == 0 {
		return Split{}, false
	}
	p := func(x, y uint64) float64 { return 100 * d(x, y) / tot }
	return Split{
		User:    p(a.User+a.Nice, b.User+b.Nice),
		System:  p(a.System, b.System),
		Softirq: p(a.Softirq, b.Softirq),
		Irq:     p(a.Irq, b.Irq),
		Idle:    p(a.Idle, b.Idle),
		Iowait:  p(a.Iowait, b.Iowait),
		Steal:   p(a.Steal, b.Steal),
	}, true
}

// Delta is the change between two Stat snapshots, as percentages.
type Delta struct {
	Total  Split
	PerCPU map[int]Split
}

// DeltaStat returns the split between two snapshots, or an error when the
// interval was too short for the kernel's tick counters to move.
func DeltaStat(a, b *Stat) (*Delta, error) {
	t, ok := SplitOf(a.Total, b.Total)
	if !ok {
		return nil, errors.New("cpu stat: no ticks elapsed between snapshots (interval too short)")
	}
	d := &Delta{Total: t, PerCPU: map[int]Split{}}
	for n, x := range a.PerCPU {
		if y, ok := b.PerCPU[n]; ok {
			if s, ok := SplitOf(x, y); ok {
				d.PerCPU[n] = s
			}
		}
	}
	return d, nil
}

// UDPCounters is the "Udp:" section of /proc/net/snmp, keyed by the kernel's
// names (InDatagrams, NoPorts, InErrors, OutDatagrams, RcvbufErrors,
// SndbufErrors, InCsumErrors, IgnoredMulti, MemErrors).
type UDPCounters map[string]int64

// ReadUDP parses the calling process's network namespace's UDP counters. It
// prefers <proc>/thread-self/net/snmp, which follows a thread that joined
// another namespace, and falls back to <proc>/net/snmp.
func (fs FS) ReadUDP() (UDPCounters, error) {
	b, err := os.ReadFile(filepath.Join(fs.Proc, "thread-self", "net", "snmp"))
	if err != nil {
		b, err = os.ReadFile(filepath.Join(fs.Proc, "net", "snmp"))
	}
	if err != nil {
		return nil, fmt.Errorf("read udp counters: %w", err)
	}
	return parseSNMP(b, "Udp:")
}

func parseSNMP(b []byte, section string) (UDPCounters, error) {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != section {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		if len(f)-1 != len(names) {
			return nil, fmt.Errorf("parse snmp %s: %d values for %d names", section, len(f)-1, len(names))
		}
		c := UDPCounters{}
		for i, n := range names {
			v, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parse snmp %s %s: %w", section, n, err)
			}
			c[n] = v
		}
		return c, nil
	}
	return nil, fmt.Errorf("parse snmp: no %s section", section)
}

// Sub returns c - before for each counter present in both.
func (c UDPCounters) Sub(before UDPCounters) UDPCounters {
	d := UDPCounters{}
	for k, v := range c {
		if w, ok := before[k]; ok {
			d[k] = v - w
		}
	}
	return d
}

// ProcessCPU is the calling process's user and system CPU time so far
// (getrusage RUSAGE_SELF: all threads, finished and running).
func ProcessCPU() (user, sys time.Duration, err error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), nil
}

// PossibleCPUs is one more than the highest CPU number this kernel can ever
// use (<sys>/devices/system/cpu/possible, a list such as "0-3,8-11"): every
// CPU number getcpu(2) can return is below it, online or not yet.
func (fs FS) PossibleCPUs() (int, error) {
	b, err := os.ReadFile(filepath.Join(fs.Sys, "devices", "system", "cpu", "possible"))
	if err != nil {
		return 0, fmt.Errorf("read possible cpus: %w", err)
	}
	return parseCPUList(string(b))
}

// parseCPUList returns one more than the highest CPU number of a kernel
// CPU list ("0", "0-1", "0-3,8-11").
func parseCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("parse cpu list: empty")
	}
	top := -1
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, fmt.Errorf("parse cpu list %q: bad number %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("parse cpu list %q: bad range %q", s, r)
			}
		}
		top = max(top, b)
	}
	return top + 1, nil
}
