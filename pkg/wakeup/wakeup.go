// Package wakeup keeps idle CPUs from sleeping deeply while a latency is
// measured, so a datapath's few microseconds are not swamped by the cost of
// waking an idle (virtual) CPU.
//
// On a VM an idle vCPU halts; the host deschedules it, and the interrupt that
// wakes the receiver of a ping-pong message costs tens of microseconds (27 µs
// measured here under the haltpoll driver, more than the whole veth datapath).
// Three policies:
//
//   - none: the machine as it is.
//   - auto (the default): hold for request/response tests, none for
//     streams (ForTest).
//   - hold: keep /dev/cpu_dma_latency at 0 while measuring (what tuned's
//     latency-performance profile does). It works only through a cpuidle
//     driver: with the haltpoll or intel_idle driver the idle loop then polls
//     instead of halting. With no cpuidle driver ("none", as on many VMs) the
//     request is accepted and changes nothing.
//   - spin: run one SCHED_IDLE busy thread per CPU in a separate process
//     (comm "cnb-spin"). The scheduler preempts it at once when real work
//     wakes up, so no CPU ever halts; its weight is the lowest there is, so
//     it takes ~0.3 % from a CPU-bound task. It costs power and shows as
//     "nice" time in /proc/stat; the engine's own CPU (getrusage) is unchanged.
//
// Neither policy changes anything that outlives the process: the kernel drops
// a cpu_dma_latency request when its file is closed and the spinner dies with
// its parent (PR_SET_PDEATHSIG), so a SIGKILLed run leaves nothing to undo
// and there is nothing to journal.
package wakeup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
)

// Policy is how idle CPUs are kept awake during a measured window.
type Policy string

// The policies. Auto resolves to one of the others from what the host offers.
const (
	None Policy = "none"
	Hold Policy = "hold"
	Spin Policy = "spin"
	Auto Policy = "auto"
)

// ErrInvalid is returned for a policy name that does not exist.
var ErrInvalid = errors.New("invalid wake-up policy")

// Parse checks a policy name ("" is Auto).
func Parse(s string) (Policy, error) {
	switch p := Policy(strings.TrimSpace(s)); p {
	case "":
		return Auto, nil
	case None, Hold, Spin, Auto:
		return p, nil
	}
	return "", fmt.Errorf("%w %q: use auto, spin, hold or none", ErrInvalid, s)
}

// Host is what decides which policy works here.
type Host struct {
	// Driver is the cpuidle driver ("none" when the kernel has none, "" when
	// it could not be read).
	Driver string
	// DeepStates is how many of CPU 0's idle states have a non-zero exit
	// latency: what /dev/cpu_dma_latency=0 can forbid.
	DeepStates int
}

// Detect reads the cpuidle driver and CPU 0's idle states under sysfs
// (normally /sys).
func Detect(sysfs string) Host {
	var h Host
	b, err := os.ReadFile(filepath.Join(sysfs, "devices/system/cpu/cpuidle/current_driver"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			h.Driver = "none" // no cpuidle: the arch's default idle (HLT on x86)
		}
		return h
	}
	h.Driver = strings.TrimSpace(string(b))
	states, _ := filepath.Glob(filepath.Join(sysfs, "devices/system/cpu/cpu0/cpuidle/state*/latency"))
	for _, s := range states {
		if v, err := os.ReadFile(s); err == nil && strings.TrimSpace(string(v)) != "0" {
			h.DeepStates++
		}
	}
	return h
}

// ForTest resolves Auto for one test: a request/response test (tcp_lat,
// udp_lat, tcp_crr), whose every message waits for a blocked thread to be
// woken, is measured with Hold — what tuned's latency-performance and
// network-latency profiles do on a node, and what seed 000 recommends —
// and a stream test with None, as tuned's throughput-performance leaves
// idle states alone. The rule is fixed, so two runs of one experiment
// measure under the same policy whatever the machine did at their start
// (a calibration at the start of each run once chose by a one-second
// measurement and contradicted the test it chose for; docs/reports.md).
// Other policies come back unchanged; the reason is empty for them.
func ForTest(p Policy, test string) (Policy, string) {
	if p != Auto && p != "" {
		return p, ""
	}
	switch test {
	case result.TCPLat, result.UDPLat, result.TCPCRR:
		return Hold, "auto: hold for request/response tests"
	}
	return None, "auto: none for stream tests"
}
