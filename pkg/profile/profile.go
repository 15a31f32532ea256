// Package profile samples every CPU with perf events during a measured
// window and returns the samples as folded stacks (Brendan Gregg's
// FlameGraph format: "comm;frame;frame;leaf count", root first).
//
// It talks to the kernel through perf_event_open(2) and an mmap'ed ring
// buffer per CPU (golang.org/x/sys/unix): no cgo and no perf binary at run
// time, so the static cnibench binary profiles anywhere it can open the
// events.
//
// What is sampled: one event per online CPU, system wide (pid -1), the
// hardware cycles counter where the host has one and the software cpu-clock
// otherwise (most VMs, this one included). Each sample carries the
// interrupted IP, the pid/tid, the period and the kernel and user
// callchains. Kernel frames are named from /proc/kallsyms; user frames are
// not symbolised (that would need every process's ELF symbols): a sample
// taken in user space becomes the single frame "[user]" under its process's
// comm, so user time is attributed per process (the engine, ovs-vswitchd,
// iperf3, …), not per function.
//
// Default rate: DefaultFrequency (499 Hz per CPU). It is prime, so it does
// not beat against the 250/1000 Hz scheduler tick, and measured on this
// 2-vCPU VM it keeps the overhead on tcp_lat and tcp_bw within the 3 %
// budget (docs/profiling.md gives the command and figures). A 10 s window
// gives ~5,000 samples per CPU, enough for a stage of 1 % to hold ~50.
package profile

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DefaultFrequency is the sampling rate per CPU in Hz (see the package doc).
const DefaultFrequency = 499

// MaxFrequency bounds --profile-rate: above it the sampler's own cost
// becomes the thing measured.
const MaxFrequency = 10000

// ErrPermission is returned when this process may not open system-wide perf
// events with kernel callchains.
var ErrPermission = errors.New("perf events not permitted")

// ErrNotSupported is returned when the kernel has no usable perf event
// (built without CONFIG_PERF_EVENTS, or a seccomp filter refuses the call).
var ErrNotSupported = errors.New("perf events not supported")

// Event names the perf event a profile was sampled with.
type Event string

const (
	// EventCycles is the hardware CPU-cycles counter: it does not count while
	// a CPU is halted, so a cycles profile has no idle stage.
	EventCycles Event = "cycles"
	// EventCPUClock is the software cpu-clock (an hrtimer per CPU); its
	// sample period is in nanoseconds, so a profile converts to CPU time.
	EventCPUClock Event = "cpu-clock"
)

// Options choose the event and the rate.
type Options struct {
	// Frequency in Hz per CPU; 0 means DefaultFrequency.
	Frequency int
	// Event: "" picks cycles where the host has a PMU, cpu-clock otherwise.
	Event Event
}

func (o Options) withDefaults() (Options, error) {
	if o.Frequency == 0 {
		o.Frequency = DefaultFrequency
	}
	if o.Frequency < 1 || o.Frequency > MaxFrequency {
		return o, fmt.Errorf("profile rate %d Hz: want 1..%d", o.Frequency, MaxFrequency)
	}
	switch o.Event {
	case "", EventCycles, EventCPUClock:
	default:
		return o, fmt.Errorf("profile event %q: want cycles or cpu-clock", o.Event)
	}
	return o, nil
}

// Profile is what one window's sampling found.
type Profile struct {
	Event     Event `json:"event"`
	Frequency int   `json:"frequency_hz"`
	CPUs      int   `json:"cpus"`
	// WindowNs is the wall time the events were enabled.
	WindowNs int64 `json:"window_ns"`
	// Samples is the number of samples read; Lost the number the kernel
	// dropped because a ring buffer was full.
	Samples uint64 `json:"samples"`
	Lost    uint64 `json:"lost"`
	// PeriodSum is the sum of the samples' periods: nanoseconds of CPU time
	// for cpu-clock, cycles for cycles.
	PeriodSum uint64 `json:"period_sum"`
	// Stacks maps a folded stack (root first, ";"-separated, the first
	// frame the process comm) to its sample count.
	Stacks map[string]uint64 `json:"-"`
}

// CPUSeconds is the CPU time the profile covers: for cpu-clock the sum of
// the sample periods. ok is false for cycles, whose periods are not time.
func (p *Profile) CPUSeconds() (float64, bool) {
	if p.Event != EventCPUClock || p.PeriodSum == 0 {
		return 0, false
	}
	return float64(p.PeriodSum) / 1e9, true
}

// paranoid reads kernel.perf_event_paranoid for the permission message.
func paranoid() string {
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// permissionError builds the one-line error saying what to change.
func permissionError(cause error) error {
	p := paranoid()
	hint := "run as root or give the process CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8)"
	if v, err := strconv.Atoi(p); err == nil && v > -1 {
		hint += ", or set kernel.perf_event_paranoid to -1"
	}
	return fmt.Errorf("%w (system-wide sampling with kernel callchains; kernel.perf_event_paranoid=%s: %v): %s",
		ErrPermission, p, cause, hint)
}
