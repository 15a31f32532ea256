package stages

import (
	"strings"
	"testing"
)

func TestProgramOf(t *testing.T) {
	const rx = "swapper;do_idle;asm_common_interrupt;irq_exit_rcu;handle_softirqs;net_rx_action;__napi_poll;process_backlog;__netif_receive_skb_core.constprop.0"
	for stack, want := range map[string]string{
		// A tail-called program sits directly under the tcx hook.
		rx + ";bpf_prog_3c3b4c12a0d0e3f1_tail_handle_ipv4;htab_lru_map_lookup_elem": "tail_handle_ipv4",
		// A subprogram is its caller's.
		"cnibench;[user];__dev_queue_xmit;bpf_prog_3391bd4060f0a3ac_tail_handle_snat_fwd_ipv4;bpf_prog_b976a08390541314_snat_v4_needs_masquerade;__htab_map_lookup_elem": "tail_handle_snat_fwd_ipv4",
		// A program reached again through kernel frames is the inner one.
		rx + ";bpf_prog_1111111111111111_cil_from_container;bpf_clone_redirect;__dev_queue_xmit;bpf_prog_2222222222222222_cil_to_netdev;trie_lookup_elem": "cil_to_netdev",
		// Unwinding that stopped at the program.
		"cnibench;[user];bpf_prog_046749992058f144_cil_from_container": "cil_from_container",
		rx + ";tcx_run": "", "cnibench;[user]": "", "bpf_prog_0123456789abcdef_comm_not_frame": "",
	} {
		if got := ProgramOf(stack); got != want {
			t.Errorf("ProgramOf(…%s) = %q, want %q", stack[max(0, len(stack)-70):], got, want)
		}
	}
}

func TestProgramRole(t *testing.T) {
	for name, want := range map[string]string{
		"cil_from_container": "pod", "tail_handle_ipv4": "pod", "tail_handle_ipv4_from_netdev": "node device",
		"tail_handle_ipv4_from_host": "host", "cil_to_overlay": "tunnel", "cil_sock4_connect": "socket LB",
		"tail_nodeport_nat_ingress_ipv4": "node device", "cnb_fast_ingress": "cnibench fast path", "xdp_dispatcher": "",
	} {
		if got := ProgramRole(name); got != want {
			t.Errorf("ProgramRole(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestCiliumPrograms reads stacks sampled by `k8s run --profile` on real
// Cilium 1.20.2 (testdata/README.md): every eBPF sample is named by exactly
// one program, Cilium's entry programs and tail calls are named with their
// role, a subprogram is never taken for a program, and each mode has the
// programs its datapath runs.
func TestCiliumPrograms(t *testing.T) {
	for mode, want := range map[string][]string{
		"vxlan-kpr-nokp": {"tail_handle_ipv4 (pod)", "cil_from_container (pod)", "cil_to_netdev (node device)", "cil_to_overlay (tunnel)",
			"cil_from_overlay (tunnel)", "cil_sock4_connect (socket LB)", "tail_handle_snat_fwd_ipv4 (node device)"},
		"native-kpr-bpfhost-nokp": {"tail_handle_ipv4 (pod)", "cil_to_netdev (node device)", "cil_sock4_connect (socket LB)", "tail_handle_snat_fwd_ipv4 (node device)"},
		"native-kp":               {"cil_from_container (pod)", "cil_from_host (host)", "tail_ipv4_ct_egress (pod)"},
	} {
		b := Aggregate(load(t, "cilium-"+mode))
		got := map[string]ProgramShare{}
		var named uint64
		for _, p := range b.Programs {
			got[p.Name+" ("+p.Role+")"] = p
			named += p.Self
			if p.Inclusive < p.Self {
				t.Errorf("%s: %s inclusive %d < self %d", mode, p.Name, p.Inclusive, p.Self)
			}
			if p.Name == "snat_v4_needs_masquerade" {
				t.Errorf("%s: a subprogram named as a program", mode)
			}
		}
		if ebpf := b.Get(BPF).Self; named != ebpf || ebpf == 0 {
			t.Errorf("%s: programs hold %d self samples, the ebpf stage %d", mode, named, ebpf)
		}
		for _, w := range want {
			if got[w].Self == 0 {
				t.Errorf("%s: no samples in %s; programs %v", mode, w, b.Programs)
			}
		}
		_, tunnel := got["cil_to_overlay (tunnel)"]
		if tunnel != strings.HasPrefix(mode, "vxlan") {
			t.Errorf("%s: tunnel program present %v", mode, tunnel)
		}
	}
	// The subprogram's samples are its caller's.
	bpfhost := load(t, "cilium-native-kpr-bpfhost-nokp")
	var sub uint64
	for st, n := range bpfhost {
		if strings.Contains(st, "_snat_v4_needs_masquerade") {
			sub += n
			if p := ProgramOf(st); p != "tail_handle_snat_fwd_ipv4" {
				t.Errorf("subprogram stack named %q", p)
			}
		}
	}
	if sub == 0 {
		t.Error("no subprogram stack in the capture: the case is not exercised")
	}
}

func TestWriteTextNamesPrograms(t *testing.T) {
	c := &Cell{Arm: "pod-cross-node", Test: "tcp_crr", MsgSize: 1, Unit: PerTransaction, CostMissing: "x"}
	c.Shares = Aggregate(load(t, "cilium-vxlan-kpr-nokp"))
	var b strings.Builder
	(&Report{Cells: []*Cell{c}}).WriteText(&b)
	if !strings.Contains(b.String(), "ebpf by program: tail_handle_ipv4 (pod) 38.6%, cil_lxc_policy (pod)") {
		t.Errorf("text:\n%s", b.String())
	}
}
