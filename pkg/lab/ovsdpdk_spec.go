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
	// MemoryMB, when set, runs DPDK without hugepages (--no-huge) in this
	// much anonymous memory instead (the OVN presets' dpdk=on: two
	// vswitchds, and no host setting changed for them); Hugepages is then
	// 0.
	MemoryMB int `json:"memory_mb,omitempty"`
}

const (
	dpdkDefaultHugepages = 256
	dpdkMinHugepages     = 64
	dpdkMaxHugepages     = 8192
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

// ringFrames is the framecnt the af_packet ports are given.
func (d *DPDKSpec) ringFrames() int {
	if d.RingFrames == 0 {
		return dpdkDefaultRingFrames
	}
	return d.RingFrames
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
