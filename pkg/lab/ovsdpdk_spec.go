package lab

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// DPDKSpec is the ovs-dpdk preset's switch: what Red Hat's OVN-Kubernetes
// DPDK datapath (seed 003) tunes — PMD threads pinned to CPUs, PMD
// load-based sleeping, userspace TSO and the hugepages DPDK runs in.
type DPDKSpec struct {
	// PMDCPUs are the CPUs of the PMD threads (other_config:pmd-cpu-mask);
	// empty = the highest-numbered online CPU, chosen at lab up.
	PMDCPUs []int `json:"pmd_cpus,omitempty"`
	// PMDSleepUs is other_config:pmd-maxsleep, the longest sleep (µs) a PMD
	// with no load may take; 0 (OVS's default) never sleeps: it spins.
	PMDSleepUs int `json:"pmd_sleep_us"`
	// UserspaceTSO is other_config:userspace-tso-enable.
	UserspaceTSO bool `json:"userspace_tso,omitempty"`
	// Hugepages counts the 2 MiB pages reserved (vm.nr_hugepages, journaled)
	// for DPDK while the lab is up; DPDK gets all of them (dpdk-socket-mem).
	Hugepages int `json:"hugepages"`
	// RingFrames is the number of frames in each af_packet port's receive
	// ring and in its transmit ring (DPDK's af_packet framecnt): the
	// ports' queue size. 0 = DPDK's default (512).
	RingFrames int `json:"ring_frames,omitempty"`
}

const (
	dpdkDefaultHugepages = 256
	dpdkMaxSleepUs       = 10000 // OVS 3.1's ceiling for pmd-maxsleep
	dpdkMaxCPU           = 1023
	dpdkMaxMTU           = 1500 // af_packet's default 2 KiB frames hold a 1500-byte packet
	// DPDK's af_packet driver packs two 2 KiB frames per 4 KiB ring block;
	// a power of two keeps the block count whole. 8192 frames per ring is
	// 16 MiB of kernel memory per ring, four rings per lab.
	dpdkMinRingFrames = 64
	dpdkMaxRingFrames = 8192
	// dpdkDefaultRingFrames is the af_packet driver's framecnt default.
	dpdkDefaultRingFrames = 512
)

func defaultDPDK() *DPDKSpec { return &DPDKSpec{Hugepages: dpdkDefaultHugepages} }

// setDPDK parses one of the ovs-dpdk knobs; bad returns the knob's usual
// "bad value" error.
func (s *Spec) setDPDK(key, value string, bad func() error) error {
	if s.Topology != TopoOVSDPDK || s.DPDK == nil {
		return fmt.Errorf("knob %s: only the ovs-dpdk topology takes it (topology is %s)", key, s.Topology)
	}
	v := strings.TrimSpace(value)
	switch key {
	case "pmd_cpus":
		cpus, err := parseCPUList(v)
		if err != nil {
			return fmt.Errorf("knob pmd_cpus: %v (allowed: %s)", err, knobHelp[key])
		}
		s.DPDK.PMDCPUs = cpus
	case "pmd_sleep":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > dpdkMaxSleepUs {
			return bad()
		}
		s.DPDK.PMDSleepUs = n
	case "userspace_tso":
		on, ok := parseOnOff(v)
		if !ok {
			return bad()
		}
		s.DPDK.UserspaceTSO = on
	case "hugepages":
		n, err := strconv.Atoi(v)
		if err != nil || n < 64 || n > 8192 {
			return bad()
		}
		s.DPDK.Hugepages = n
	case "ring_frames":
		n, err := strconv.Atoi(v)
		if err != nil || n < dpdkMinRingFrames || n > dpdkMaxRingFrames || n&(n-1) != 0 {
			return bad()
		}
		s.DPDK.RingFrames = n
	}
	return nil
}

// ringFrames is the framecnt the af_packet ports are given.
func (d *DPDKSpec) ringFrames() int {
	if d.RingFrames == 0 {
		return dpdkDefaultRingFrames
	}
	return d.RingFrames
}

// validateDPDK refuses what the ovs-dpdk lab cannot build: its pods sit on
// one OVS bridge with no node routing, so the knobs that put rules in a
// routing node or a service path have nowhere to go.
func (s *Spec) validateDPDK() error {
	if s.DPDK == nil {
		return fmt.Errorf("ovs-dpdk: no switch settings (build the spec with Preset)")
	}
	switch {
	case s.Services > 0:
		return fmt.Errorf("knob services: not supported on %s", s.Topology)
	case s.Conntrack || len(s.Notrack) > 0:
		return fmt.Errorf("knob conntrack/notrack: not supported on %s (its pods have no routing node)", s.Topology)
	case s.MTU > dpdkMaxMTU:
		return fmt.Errorf("knob mtu: at most %d on %s (the af_packet ports' 2 KiB frames)", dpdkMaxMTU, s.Topology)
	case s.PodsPerNode != 2 || s.Nodes != 1:
		return fmt.Errorf("ovs-dpdk: one switch node with two pods (client, server) only")
	}
	return nil
}

// parseCPUList parses a Linux CPU list ("1", "0-1", "0,2-3") into sorted,
// distinct CPU numbers.
func parseCPUList(v string) ([]int, error) {
	seen := map[int]bool{}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a > dpdkMaxCPU {
			return nil, fmt.Errorf("bad CPU %q", f)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b > dpdkMaxCPU {
				return nil, fmt.Errorf("bad CPU range %q", f)
			}
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nil
}

// cpuMask is pmd-cpu-mask's hexadecimal form of a CPU list ("0x2" for CPU 1).
func cpuMask(cpus []int) string {
	if len(cpus) == 0 {
		return "0x0"
	}
	digits := make([]byte, cpus[len(cpus)-1]/4+1)
	for i := range digits {
		digits[i] = 0
	}
	for _, c := range cpus {
		digits[c/4] |= 1 << (c % 4)
	}
	var b strings.Builder
	b.WriteString("0x")
	for i := len(digits) - 1; i >= 0; i-- {
		b.WriteByte("0123456789abcdef"[digits[i]])
	}
	return b.String()
}
