package stages

import (
	"cmp"
	"slices"
	"strings"

	"github.com/cnibench/cnibench/pkg/profile"
)

// Time in the ebpf stage is also told by program: a JITed program's frame
// is bpf_prog_<tag>_<name> in the kernel's symbols, so a stack names the
// programs it ran through (Cilium's cil_from_container, its tail calls
// tail_handle_ipv4, …, cnibench's own cnb_* fast path).
//
// Which program a sample was in: walking from the leaf up, the first
// program frame, then on up through the program frames directly above it.
// A BPF-to-BPF call (a subprogram such as Cilium's
// snat_v4_needs_masquerade) has its own symbol and sits directly under its
// caller, so the run of adjacent program frames is one program and its
// subprograms, named by the outermost. A tail call replaces its caller's
// frame, so a tail-called program sits directly under the hook
// (__netif_receive_skb_core for tcx ingress, __dev_queue_xmit for egress)
// and is named itself: the entry program is not on the stack once it has
// tail-called. A program reached again through kernel frames (a helper that
// sends a packet on at once) is another program, so the walk stops at the
// first kernel frame above the run.

// ProgramShare is one BPF program's part of a profile.
type ProgramShare struct {
	// Name is the program's name ("(hook)" for ebpf samples with no
	// program on the stack: the tc/tcx hook's own code).
	Name string `json:"name"`
	// Role says what the program does where its family is known (Cilium's:
	// "pod", "node device", "tunnel", "socket LB", "host").
	Role string `json:"role,omitempty"`
	// Self counts the samples of the ebpf stage in this program (the map
	// lookups and other helpers it called included); Inclusive every
	// sample with it on the stack, whatever the stage.
	Self      uint64  `json:"self_samples"`
	Inclusive uint64  `json:"inclusive_samples"`
	SelfPct   float64 `json:"self_pct"`
	InclPct   float64 `json:"inclusive_pct"`
}

// HookOnly names ebpf samples with no program on their stack.
const HookOnly = "(hook)"

// ProgramOf returns the BPF program a stack's leaf ran in (see above), ""
// when no program is on the stack.
func ProgramOf(stack string) string {
	frames := strings.Split(stack, ";")
	i := len(frames) - 1
	for i >= 1 && progName(frames[i]) == "" {
		i--
	}
	if i < 1 {
		return ""
	}
	for i > 1 && progName(frames[i-1]) != "" {
		i--
	}
	return progName(frames[i])
}

// programsOnStack lists every program on the stack, once each, named as
// ProgramOf would name it (subprograms under their caller).
func programsOnStack(stack string) []string {
	frames := strings.Split(stack, ";")
	var out []string
	for i := 1; i < len(frames); i++ {
		name := progName(frames[i])
		if name == "" || (i > 1 && progName(frames[i-1]) != "") {
			continue // a subprogram: its program is the frame above
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// progName is the program name of a JITed program's frame, "" for any
// other frame.
func progName(frame string) string {
	if !strings.HasPrefix(frame, "bpf_prog_") {
		return ""
	}
	_, name, ok := profile.ProgSymbol(frame)
	if !ok {
		return ""
	}
	return name
}

// programRoles says what a known program family does, by name prefix; the
// longest matching prefix wins. Cilium's names are those of its bpf/
// sources (bpf_lxc.c: the pod's device; bpf_host.c: the node's devices and
// cilium_host; bpf_overlay.c: the tunnel device; bpf_sock.c: the socket
// load balancer).
var programRoles = []struct{ prefix, role string }{
	{"cil_from_container", "pod"}, {"cil_lxc_policy", "pod"}, {"cil_to_container", "pod"},
	{"tail_handle_ipv4", "pod"}, {"tail_handle_ipv6", "pod"}, {"tail_ipv4_", "pod"}, {"tail_ipv6_", "pod"},
	{"cil_from_netdev", "node device"}, {"cil_to_netdev", "node device"}, {"tail_handle_ipv4_from_netdev", "node device"},
	{"tail_nodeport", "node device"}, {"tail_handle_snat_fwd", "node device"}, {"tail_handle_nat_fwd", "node device"},
	{"tail_no_service", "node device"}, {"tail_rev_nodeport", "node device"},
	{"cil_from_overlay", "tunnel"}, {"cil_to_overlay", "tunnel"},
	{"cil_from_host", "host"}, {"cil_to_host", "host"}, {"cil_host_policy", "host"}, {"tail_handle_ipv4_from_host", "host"},
	{"cil_sock", "socket LB"},
	{"tail_drop_notify", "drop notification"}, {"tail_handle_arp", "pod"},
	{"cnb_", "cnibench fast path"},
}

// ProgramRole is what a program does, "" when its family is not known.
func ProgramRole(name string) string {
	best, n := "", 0
	for _, r := range programRoles {
		if len(r.prefix) > n && strings.HasPrefix(name, r.prefix) {
			best, n = r.role, len(r.prefix)
		}
	}
	return best
}

// aggregatePrograms tells the profile's BPF time by program, largest self
// first; nil when no sample ran in a program.
func aggregatePrograms(stacks map[string]uint64, total uint64) []ProgramShare {
	self := map[string]uint64{}
	incl := map[string]uint64{}
	for st, n := range stacks {
		progs := programsOnStack(st)
		for _, p := range progs {
			incl[p] += n
		}
		if Classify(st) != BPF {
			continue
		}
		p := ProgramOf(st)
		if p == "" {
			p = HookOnly
		}
		self[p] += n
	}
	if len(incl) == 0 {
		return nil
	}
	var out []ProgramShare
	names := map[string]bool{}
	for p := range incl {
		names[p] = true
	}
	for p := range self {
		names[p] = true
	}
	for p := range names {
		s := ProgramShare{Name: p, Role: ProgramRole(p), Self: self[p], Inclusive: incl[p]}
		if total > 0 {
			s.SelfPct = 100 * float64(s.Self) / float64(total)
			s.InclPct = 100 * float64(s.Inclusive) / float64(total)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ProgramShare) int {
		return cmp.Or(cmp.Compare(b.Self, a.Self), cmp.Compare(b.Inclusive, a.Inclusive), cmp.Compare(a.Name, b.Name))
	})
	return out
}
