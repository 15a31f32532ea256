package stages

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// Classify returns the self stage of one folded stack (root first, the
// first frame the comm; see the package doc for the rules).
func Classify(stack string) Stage {
	frames := strings.Split(stack, ";")
	comm := frames[0]
	kernel := kernelFrames(frames[1:])
	if !MeasuredComm(comm) && !inSoftirq(kernel) {
		return OtherProcs
	}
	if len(kernel) == 0 {
		if len(frames) > 1 && frames[1] == "[user]" {
			return Stage(UserPrefix + comm)
		}
		return KernelRest // a kernel thread whose stack could not be unwound
	}
	var found Stage
	at := -1
	for i := len(kernel) - 1; i >= 0; i-- {
		if s := Of(kernel[i]); s != "" {
			found, at = s, i
			break
		}
	}
	if found == "" {
		return KernelRest
	}
	if found == Scheduler {
		// Scheduling work done to wake someone is the wake-up's cost.
		for i := at - 1; i >= 0; i-- {
			if Of(kernel[i]) == Wakeup {
				return Wakeup
			}
		}
	}
	return found
}

// measured are the processes a measurement runs or drives: the engines
// and reference tools, Open vSwitch, and (by prefix) the kernel's own
// threads: idle, softirq, workqueues.
var measured = nameSet{
	exact: setOf("cnibench", "qperf", "iperf3", "sockperf", "netperf", "netserver", "ovs-vswitchd",
		"ovsdb-server", "swapper",
		"ovs-vswitchd-dp"), // ovs-vswitchd-dpdk (ovs-dpdk lab), cut to comm's 15 bytes
	prefixes: []string{"swapper/", "ksoftirqd/", "kworker/", "napi/", "migration/", "rcu_", "cpuhp/", "idle_inject/"},
}

// MeasuredComm reports whether a process belongs to the measurement (see
// OtherProcs for what happens to the rest).
func MeasuredComm(comm string) bool { return measured.has(comm) }

// inSoftirq: a softirq runs on whatever stack it interrupted, so the
// datapath's receive work can land on any process's stack.
func inSoftirq(kernel []string) bool {
	for _, f := range kernel {
		switch Normalize(f) {
		case "handle_softirqs", "__do_softirq", "net_rx_action", "net_tx_action", "do_softirq", "irq_exit_rcu":
			return true
		}
	}
	return false
}

// kernelFrames drops the "[user]" marker and the user function frames
// that may follow it ("[user:fn@module]", pkg/profile's usersyms.go):
// user frames come before the kernel's in a folded stack.
func kernelFrames(frames []string) []string {
	for len(frames) > 0 && strings.HasPrefix(frames[0], "[user") {
		frames = frames[1:]
	}
	return frames
}

// Inclusive returns every stage with a frame anywhere in the stack (each
// once); a user-space stack includes its user stage.
func Inclusive(stack string) []Stage {
	frames := strings.Split(stack, ";")
	seen := map[Stage]bool{}
	var out []Stage
	add := func(s Stage) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	kernel := kernelFrames(frames[1:])
	if c := Classify(stack); c == OtherProcs {
		return []Stage{OtherProcs}
	}
	if len(kernel) < len(frames)-1 {
		add(Stage(UserPrefix + frames[0]))
	}
	for _, f := range kernel {
		add(Of(f))
	}
	add(Classify(stack)) // kernel-other, and a wake-up reached through the scheduler
	return out
}

// Share is one stage's part of a profile.
type Share struct {
	Stage     Stage   `json:"stage"`
	Self      uint64  `json:"self_samples"`
	Inclusive uint64  `json:"inclusive_samples"`
	SelfPct   float64 `json:"self_pct"`
	InclPct   float64 `json:"inclusive_pct"`
}

// Breakdown is a profile grouped into stages.
type Breakdown struct {
	Total  uint64  `json:"samples"`
	Stages []Share `json:"stages"`
	// Programs tells the BPF programs on the stacks apart (programs.go);
	// absent when none ran.
	Programs []ProgramShare `json:"programs,omitempty"`
}

// Aggregate classifies folded stacks (stack → count) into stages, listed in
// Order with user stages after, sorted by name; stages with no sample are
// left out.
func Aggregate(stacks map[string]uint64) Breakdown {
	self := map[Stage]uint64{}
	incl := map[Stage]uint64{}
	var total uint64
	for st, n := range stacks {
		total += n
		self[Classify(st)] += n
		for _, s := range Inclusive(st) {
			incl[s] += n
		}
	}
	var b Breakdown
	b.Total = total
	b.Programs = aggregatePrograms(stacks, total)
	for _, s := range sortStages(incl) {
		sh := Share{Stage: s, Self: self[s], Inclusive: incl[s]}
		if total > 0 {
			sh.SelfPct = 100 * float64(sh.Self) / float64(total)
			sh.InclPct = 100 * float64(sh.Inclusive) / float64(total)
		}
		b.Stages = append(b.Stages, sh)
	}
	return b
}

// Get returns a stage's share (zero when the profile has none of it).
func (b Breakdown) Get(s Stage) Share {
	for _, x := range b.Stages {
		if x.Stage == s {
			return x
		}
	}
	return Share{Stage: s}
}

// sortStages lists the stages of m in report order.
func sortStages(m map[Stage]uint64) []Stage {
	pos := func(s Stage) int {
		if i := slices.Index(Order, s); i >= 0 {
			return i
		}
		return len(Order) // user stages, after the kernel's
	}
	return slices.SortedFunc(maps.Keys(m), func(a, b Stage) int {
		return cmp.Or(cmp.Compare(pos(a), pos(b)), cmp.Compare(a, b))
	})
}
