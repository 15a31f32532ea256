package stages

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/profile"
)

var update = flag.Bool("update", false, "rewrite the .golden files from the captured stacks")

// TestOf checks how Of decides, one rule of the lookup per group; the
// tables themselves are checked against real stacks by the golden tests.
func TestOf(t *testing.T) {
	for _, g := range []struct {
		rule  string
		cases map[string]Stage
	}{
		{"a name listed in full takes its stage", map[string]Stage{
			"nf_hook_slow": Netfilter, "nft_do_chain": Netfilter, "ipt_do_table": Netfilter,
			"udp_tunnel_xmit_skb": Tunnel, "veth_xmit": Veth, "net_rx_action": Softirq, "process_backlog": Softirq,
			"__napi_poll": Softirq, "try_to_wake_up": Wakeup, "ttwu_do_activate": Wakeup, "__schedule": Scheduler,
			"pv_native_safe_halt": Idle, "do_idle": Idle, "do_syscall_64": Syscall, "_copy_to_iter": Socket,
			"dev_hard_start_xmit": Netdev,
		}},
		{"a name listed in full beats its prefix", map[string]Stage{
			"sock_def_readable": Wakeup, // sock_ is Socket
			"napi_gro_receive":  Netdev, // napi_ is Softirq
			"dev_forward_skb":   Veth,   // dev_ is Netdev
			"tcp_data_ready":    Wakeup, // tcp_ is TCP
		}},
		{"otherwise a prefix names the stage", map[string]Stage{
			"nft_match_large_eval": Netfilter, "vxlan_xmit_one": Tunnel, "vxlan_rcv": Tunnel, "geneve_xmit": Tunnel,
			"gro_cell_poll": Tunnel, "tcp_v4_rcv": TCP, "tcp_sendmsg_locked": TCP, "ip_finish_output2": IP,
			"fib_table_lookup": IP, "br_handle_frame": Bridge, "ovs_vport_receive": OVS,
			"bpf_prog_3a1b_cnb_fast": BPF, "pick_next_task_fair": Scheduler, "__x64_sys_sendto": Syscall,
			"skb_copy_datagram_iter": Socket,
		}},
		{"the longest matching prefix wins", map[string]Stage{
			"nf_conntrack_in":         Conntrack, // not nf_'s Netfilter
			"nf_conntrack_tcp_packet": Conntrack,
			"__nf_conntrack_find_get": Conntrack, // not __nf_'s Netfilter
			"nf_nat_ipv4_out":         NAT,
			"nf_nat_inet_fn":          NAT,
			"udp_queue_rcv_one_skb":   UDP,
			"udp_tunnel_sock_release": Tunnel, // not udp_'s UDP
			"ip_route_input_slow":     IP,
			"ip_tunnel_xmit":          Tunnel, // not ip_'s IP
		}},
		{"clone suffixes are removed first", map[string]Stage{
			"do_softirq.part.0": Softirq, "tcp_v4_rcv.cold": TCP, "finish_task_switch.isra.0": "",
		}},
		{"helpers and unknown functions name no stage", map[string]Stage{
			"_raw_spin_unlock_irqrestore": "", "preempt_count_add": "", "memcpy_orig": "", "rcu_read_unlock_strict": "",
			"comment_mt": "", "some_driver_fn": "",
		}},
	} {
		for fn, want := range g.cases {
			if got := Of(fn); got != want {
				t.Errorf("%s: Of(%q) = %q, want %q", g.rule, fn, got, want)
			}
		}
	}
}

// TestStageNamesUnique: a name listed under two stages would get either of
// them, depending on map order.
func TestStageNamesUnique(t *testing.T) {
	if _, conflicts := byName(stageNames); len(conflicts) > 0 {
		t.Errorf("stageNames lists these under two stages: %v", conflicts)
	}
	_, got := byName(map[Stage][]string{TCP: {"tcp_ack", "tcp_push"}, Wakeup: {"tcp_push"}})
	if len(got) != 1 || got[0] != "tcp_push" {
		t.Errorf("byName with tcp_push under two stages: conflicts %v, want [tcp_push]", got)
	}
}

func TestClassify(t *testing.T) {
	const sendPath = "cnibench;[user];entry_SYSCALL_64_after_hwframe;do_syscall_64;ksys_write;vfs_write;sock_write_iter;tcp_sendmsg;tcp_sendmsg_locked;__tcp_push_pending_frames;tcp_write_xmit;__tcp_transmit_skb;__ip_queue_xmit;ip_output;ip_finish_output2;__dev_queue_xmit;__local_bh_enable_ip;do_softirq.part.0;handle_softirqs;net_rx_action;__napi_poll;process_backlog;__netif_receive_skb_one_core;ip_local_deliver_finish;ip_protocol_deliver_rcu;tcp_v4_rcv;tcp_v4_do_rcv;tcp_rcv_established"
	for stack, want := range map[string]Stage{
		// The finding: the lock released in waking the receiver is the wake-up.
		sendPath + ";sock_def_readable;_raw_spin_unlock_irqrestore":                                                                       Wakeup,
		sendPath + ";sock_def_readable;__wake_up_sync_key;__wake_up_common;try_to_wake_up;ttwu_do_activate;enqueue_task_fair;update_curr": Wakeup,
		sendPath + ";tcp_ack":             TCP,
		sendPath + ";tcp_ack;memcpy_orig": TCP, // an unknown leaf goes to its caller
		"cnibench;[user];entry_SYSCALL_64_after_hwframe;do_syscall_64;ksys_read;vfs_read;sock_read_iter;sock_recvmsg;tcp_recvmsg;tcp_recvmsg_locked;sk_wait_data;wait_woken;schedule_timeout;schedule;__schedule;finish_task_switch.isra.0": Scheduler,
		"swapper;common_startup_64;cpu_startup_entry;do_idle;default_idle_call;default_idle;pv_native_safe_halt":                                                                                                                            Idle,
		"swapper;cpu_startup_entry;do_idle;default_idle_call;asm_sysvec_call_function_single;sysvec_call_function_single;__flush_smp_call_function_queue;sched_ttwu_pending;ttwu_do_activate;enqueue_task_fair":                             Wakeup,
		"cnibench;[user]":     "user:cnibench",
		"ovs-vswitchd;[user]": "user:ovs-vswitchd",
		"kworker/0:1;worker_thread;process_one_work;some_driver_fn": KernelRest,
		"compile;[user]": OtherProcs, "go;[user];entry_SYSCALL_64;do_syscall_64": OtherProcs, "swapper": KernelRest,
		"compile;[user];asm_common_interrupt;irq_exit_rcu;handle_softirqs;net_rx_action;__napi_poll;process_backlog;ip_rcv":    IP,
		"cnibench;[user];do_syscall_64;ip_forward;nf_hook_slow;nft_do_chain_ipv4;nft_do_chain;nft_match_large_eval;comment_mt": Netfilter,
		"cnibench;[user];do_syscall_64;ip_rcv;nf_hook_slow;nf_conntrack_in;nf_conntrack_tcp_packet":                            Conntrack,
	} {
		if got := Classify(stack); got != want {
			t.Errorf("Classify(...%s) = %q, want %q", stack[max(0, len(stack)-80):], got, want)
		}
	}
}

func TestInclusive(t *testing.T) {
	got := Inclusive("cnibench;[user];do_syscall_64;__dev_queue_xmit;dev_hard_start_xmit;vxlan_xmit;udp_tunnel_xmit_skb;ip_output;_raw_spin_lock")
	want := map[Stage]bool{"user:cnibench": true, Syscall: true, Netdev: true, Tunnel: true, IP: true}
	if len(got) != len(want) {
		t.Fatalf("Inclusive = %v, want %v", got, want)
	}
	for _, s := range got {
		if !want[s] {
			t.Errorf("Inclusive has %q", s)
		}
	}
}

func load(t *testing.T, name string) map[string]uint64 {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name+".folded"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := profile.ParseFolded(f)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestGoldens classifies stacks captured with cnibench's own sampler
// (cnibench run --profile on the native, vxlan and native+conntrack+
// kube-proxy presets; docs/profiling.md) and compares the breakdown with
// the committed golden. Run with -update after a deliberate table change
// and read the diff.
func TestGoldens(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.folded")
	if len(files) < 5 {
		t.Fatalf("%d captured profiles in testdata", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".folded")
		b := Aggregate(load(t, name))
		var sum float64
		for _, s := range b.Stages {
			sum += s.SelfPct
			if s.Inclusive < s.Self {
				t.Errorf("%s: %s inclusive %d < self %d", name, s.Stage, s.Inclusive, s.Self)
			}
		}
		if sum < 99.999 || sum > 100.001 {
			t.Errorf("%s: self shares sum to %v %%", name, sum)
		}
		got, _ := json.MarshalIndent(b, "", " ")
		golden := filepath.Join("testdata", name+".golden")
		if *update {
			os.WriteFile(golden, append(got, '\n'), 0o644)
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update)", err)
		}
		if strings.TrimSpace(string(want)) != strings.TrimSpace(string(got)) {
			t.Errorf("%s: breakdown changed; got\n%s", name, got)
		}
	}
}

// TestCapturedShapes checks the shapes the issue expects on real stacks:
// VXLAN has an encap/decap stage native lacks; the arm with conntrack and
// kube-proxy rules has the larger netfilter+conntrack share.
func TestCapturedShapes(t *testing.T) {
	native, vxlan, ct := Aggregate(load(t, "native-tcp_lat")), Aggregate(load(t, "vxlan-tcp_lat")), Aggregate(load(t, "conntrack-tcp_lat"))
	if native.Get(Tunnel).Inclusive != 0 || vxlan.Get(Tunnel).Self == 0 {
		t.Errorf("encap: native %+v, vxlan %+v", native.Get(Tunnel), vxlan.Get(Tunnel))
	}
	nf := func(b Breakdown) float64 { return b.Get(Netfilter).SelfPct + b.Get(Conntrack).SelfPct }
	if nf(ct) <= nf(native) {
		t.Errorf("netfilter+conntrack: %.1f%% with conntrack and rules, %.1f%% without", nf(ct), nf(native))
	}
	if w := native.Get(Wakeup); w.Self == 0 {
		t.Errorf("tcp_lat on native has no wake-up stage: %+v", native.Stages)
	}
}
