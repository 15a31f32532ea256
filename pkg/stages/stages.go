// Package stages turns folded kernel stacks into datapath stages: where the
// CPU went, in the words a network engineer uses (TCP, netfilter, VXLAN
// encap/decap, veth, softirq, waking the receiver, idle, the engine's own
// user time, …).
//
// # How a sample is classified
//
// A sample is one folded stack, root first: the process comm, then
// "[user]" if the sample was taken in user space or the kernel was entered
// from it, then the kernel frames down to the leaf. Its stage is found by
// walking the kernel frames from the LEAF UP:
//
//   - a frame listed in the helper table (spin locks, irq enable/restore,
//     preemption, RCU, memory copies' and allocators' generic entry points)
//     never names a stage and is skipped;
//   - the first frame that matches a rule of the stage table names the
//     stage, with one exception: a scheduler frame reached while waking a
//     task (try_to_wake_up, sock_def_readable and their kin further up)
//     counts as the wake-up, so the IPI and enqueue a sender pays to wake
//     the receiver show as "wakeup", not as the sender's scheduling;
//   - a frame that matches nothing is skipped too, so its time goes to the
//     nearest caller that names a stage (memcpy under tcp_sendmsg is TCP).
//
// A stack in which no kernel frame names a stage counts as "kernel-other"
// (timer interrupts with no datapath work under them, page faults, …); a
// sample taken in user space is user time of its process, "user:<comm>".
// Sampling is system wide, so a process that is not part of the
// measurement (not an engine, tool, OVS or kernel thread) counts as
// "other-processes", except for softirq work done on its stack, which is
// the datapath's and classified as usual. Every sample gets exactly one self stage, so the self
// shares of a profile sum to 100 %.
//
// Self time is that single stage per sample. Inclusive time of a stage is
// the samples that have any frame of that stage anywhere in their stack
// (each sample counted once per stage), so inclusive "vxlan" is everything
// done under vxlan_xmit and vxlan_rcv, including the IP and UDP work of the
// outer packet; inclusive shares do not sum to 100 %.
package stages

import "strings"

// Stage names a datapath stage.
type Stage string

// The stages, in the order reports list them (datapath from socket down,
// then the CPU's other states).
const (
	Syscall    Stage = "syscall"   // entry/exit, syscall dispatch
	Socket     Stage = "socket"    // socket layer and user copies
	TCP        Stage = "tcp"       //
	UDP        Stage = "udp"       //
	IP         Stage = "ip"        // IPv4/IPv6, routing, neighbour
	Netfilter  Stage = "netfilter" // hooks and rule evaluation
	Conntrack  Stage = "conntrack" //
	NAT        Stage = "nat"       //
	Netdev     Stage = "netdev"    // generic device layer, qdisc, GRO
	Veth       Stage = "veth"      //
	Bridge     Stage = "bridge"    //
	Tunnel     Stage = "encap"     // VXLAN/GENEVE/IP tunnel encap and decap
	OVS        Stage = "ovs"       // OVS kernel datapath
	BPF        Stage = "ebpf"      // eBPF programs and tc/tcx hooks
	Softirq    Stage = "softirq"   // softirq, NAPI, backlog
	Wakeup     Stage = "wakeup"    // waking a task: try_to_wake_up, IPIs
	Scheduler  Stage = "scheduler" // context switch, run queues
	Idle       Stage = "idle"      //
	KernelRest Stage = "kernel-other"
	// OtherProcs is the time of processes that are not part of the
	// measurement (a compiler another user runs meanwhile) outside
	// softirq: sampling is system wide, so it is shown, as one stage, and
	// left out of the per-transaction costs.
	OtherProcs Stage = "other-processes"
)

// UserPrefix starts the stage of a process's user-space time.
const UserPrefix = "user:"

// Order lists the kernel stages for reports; user stages follow, sorted.
var Order = []Stage{Syscall, Socket, TCP, UDP, IP, Netfilter, Conntrack, NAT, Netdev, Veth, Bridge,
	Tunnel, OVS, BPF, Softirq, Wakeup, Scheduler, Idle, KernelRest, OtherProcs}

// rule matches a kernel function name (suffixes like ".isra.0" removed):
// exact names first, then prefixes; the longest matching prefix wins, so
// "nf_conntrack_" beats "nf_" and "udp_tunnel" beats "udp".
type rule struct {
	prefix string
	stage  Stage
}

// stageNames lists, per stage, the kernel functions named in full. A name
// here wins over any prefix rule, which is how a function is put in
// another stage than its prefix says (napi_gro_receive is GRO, not NAPI;
// sock_def_readable wakes the reader). A name belongs to one stage only
// (TestStageNamesUnique).
var stageNames = map[Stage][]string{
	Syscall: {
		"entry_SYSCALL_64", "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "syscall_exit_to_user_mode",
		"syscall_exit_to_user_mode_prepare", "exit_to_user_mode_prepare", "exit_to_user_mode_loop",
		"x64_sys_call", "syscall_enter_from_user_mode", "ret_from_fork",
	},
	Socket: {
		"copy_to_user", "copy_from_user", "_copy_to_user", "_copy_from_user", "_copy_to_iter",
		"_copy_from_iter", "copy_user_enhanced_fast_string", "copy_user_generic_unrolled",
		"rep_movs_alternative", "simple_copy_to_iter", "__check_object_size", "__sys_sendto", "__sys_recvfrom",
		"__sys_sendmsg", "__sys_recvmsg", "__sys_connect", "__sys_accept4", "__sys_socket", "___sys_sendmsg",
		"___sys_recvmsg", "do_sock_setsockopt", "ksys_read", "ksys_write", "vfs_read", "vfs_write",
		"sock_read_iter", "sock_write_iter", "sockfd_lookup_light", "__fput", "__sock_release", "inet_release",
		"inet_sendmsg", "inet_recvmsg", "inet6_sendmsg", "inet6_recvmsg", "inet_stream_connect",
		"__inet_stream_connect", "inet_accept", "do_accept",
	},
	IP: {
		"dst_output", "dst_input", "neigh_resolve_output", "neigh_hh_output", "__neigh_event_send",
		"neigh_output",
	},
	Netfilter: {
		"nf_hook_slow", "nft_do_chain", "ipt_do_table", "ip6t_do_table", "nf_hook_slow_list",
		"br_nf_pre_routing", "br_nf_forward_ip",
	},
	Netdev: {
		"napi_gro_receive", "dev_queue_xmit", "__dev_queue_xmit", "dev_hard_start_xmit", "sch_direct_xmit",
		"__qdisc_run", "validate_xmit_skb", "gro_normal_list", "dev_gro_receive", "napi_gro_complete",
		"skb_gro_receive", "inet_gro_receive", "tcp_gro_receive", "tcp4_gro_receive", "udp_gro_receive",
		"udp4_gro_receive", "netdev_core_pick_tx", "skb_segment", "__skb_gso_segment", "skb_mac_gso_segment",
		"inet_gso_segment", "tcp_gso_segment", "tcp4_gso_segment", "eth_type_trans",
	},
	Veth: {
		"veth_xmit", "veth_poll", "veth_xdp_rcv", "dev_forward_skb", "__dev_forward_skb", "__dev_forward_skb2",
	},
	Tunnel: {
		"udp_tunnel_xmit_skb", "iptunnel_xmit", "__iptunnel_pull_header", "iptunnel_handle_offloads",
		"udp_tunnel_nic_work",
	},
	BPF: {
		"tcf_classify", "tcx_run", "sch_handle_ingress", "sch_handle_egress", "cls_bpf_classify",
		"bpf_dispatcher_xdp_func", "do_xdp_generic", "bpf_prog_run_generic_xdp", "__bpf_prog_run",
		"tcf_bpf_act", "skb_do_redirect",
	},
	Softirq: {
		"net_rx_action", "process_backlog", "__napi_poll", "napi_poll", "do_softirq", "__do_softirq",
		"handle_softirqs", "run_ksoftirqd", "net_tx_action", "enqueue_to_backlog", "netif_rx",
		"netif_rx_internal", "__netif_rx", "napi_complete_done", "napi_schedule_prep", "__napi_schedule",
		"____napi_schedule", "irq_exit_rcu", "__irq_exit_rcu", "netif_receive_skb", "__netif_receive_skb",
		"__netif_receive_skb_core", "__netif_receive_skb_one_core", "netif_receive_skb_list_internal",
		"__netif_receive_skb_list_core",
	},
	Wakeup: {
		"try_to_wake_up", "wake_up_process", "wake_up_q", "default_wake_function", "autoremove_wake_function",
		"woken_wake_function", "pollwake", "ep_poll_callback", "sock_def_readable", "sock_def_write_space",
		"sk_stream_write_space", "tcp_data_ready", "sock_def_wakeup", "native_send_call_func_single_ipi",
		"send_call_function_single_ipi", "__smp_call_single_queue", "ttwu_queue_wakelist", "ttwu_do_activate",
		"ttwu_queue", "x2apic_send_IPI", "kvm_send_ipi_mask", "__wake_up", "__wake_up_common",
		"__wake_up_common_lock", "__wake_up_sync_key", "__wake_up_sync", "wake_up_bit", "irq_work_queue",
		"__flush_smp_call_function_queue", "flush_smp_call_function_queue",
		"generic_smp_call_function_single_interrupt", "__sysvec_call_function_single",
		"sysvec_call_function_single", "asm_sysvec_call_function_single", "sysvec_reschedule_ipi",
		"asm_sysvec_reschedule_ipi", "futex_wake",
	},
	Scheduler: {
		"schedule", "__schedule", "schedule_timeout", "schedule_hrtimeout_range",
		"schedule_hrtimeout_range_clock", "do_nanosleep", "context_switch", "__switch_to", "__switch_to_asm",
		"update_curr", "update_load_avg", "enqueue_entity", "dequeue_entity", "set_next_entity",
		"put_prev_entity", "newidle_balance", "sched_balance_newidle", "sched_balance_rq", "load_balance",
		"scheduler_tick", "sched_tick", "task_tick_fair", "yield_task_fair", "do_sched_yield",
		"sched_ttwu_pending", "futex_wait", "futex_wait_queue", "do_futex", "do_epoll_wait", "ep_poll",
		"do_select", "do_sys_poll", "core_sys_select", "do_poll",
	},
	Idle: {
		"pv_native_safe_halt", "native_safe_halt", "default_idle", "default_idle_call", "arch_cpu_idle",
		"do_idle", "cpu_startup_entry", "cpuidle_enter", "cpuidle_enter_state", "cpuidle_idle_call",
		"haltpoll_enter_idle", "poll_idle", "intel_idle", "acpi_idle_enter", "mwait_idle", "start_secondary",
		"rest_init", "x86_64_start_kernel", "kvm_wait", "amd_e400_idle", "common_startup_64",
		"secondary_startup_64_no_verify", "cpuidle_poll_time",
	},
}

// exact maps whole function names to their stage. No name is listed under
// two stages (TestStageNamesUnique), so it does not depend on map order.
var exact, _ = byName(stageNames)

// byName inverts a stage → names table. A name listed under two stages
// keeps one of them and is returned in conflicts.
func byName(table map[Stage][]string) (stageOf map[string]Stage, conflicts []string) {
	stageOf = map[string]Stage{}
	for stage, names := range table {
		for _, n := range names {
			if _, dup := stageOf[n]; dup {
				conflicts = append(conflicts, n)
			}
			stageOf[n] = stage
		}
	}
	return stageOf, conflicts
}

// prefixes, longest match wins.
var prefixes = []rule{
	{"__x64_sys_", Syscall}, {"__ia32_sys_", Syscall}, {"__se_sys_", Syscall}, {"__do_sys_", Syscall},
	{"sock_", Socket}, {"__sock_", Socket}, {"sk_", Socket}, {"__sk_", Socket}, {"skb_copy_datagram", Socket},
	{"__skb_datagram_iter", Socket}, {"skb_copy_bits", Socket},
	{"tcp_", TCP}, {"__tcp_", TCP}, {"tcp4_", TCP}, {"tcp6_", TCP}, {"inet_csk_", TCP}, {"__inet_lookup", TCP},
	{"inet_lookup", TCP}, {"inet_ehash", TCP}, {"__inet_hash", TCP}, {"inet_hash", TCP}, {"bbr_", TCP},
	{"cubictcp_", TCP}, {"inet_twsk", TCP},
	{"udp_", UDP}, {"__udp", UDP}, {"udp4_", UDP}, {"udpv6_", UDP}, {"udp6_", UDP}, {"__udp4_", UDP},
	{"ip_", IP}, {"__ip_", IP}, {"ip6_", IP}, {"__ip6_", IP}, {"ipv6_", IP}, {"fib_", IP}, {"fib6_", IP},
	{"__fib_", IP}, {"rt_", IP}, {"rt6_", IP}, {"ip_route_", IP}, {"dst_", IP}, {"neigh_", IP}, {"arp_", IP},
	{"inet_", IP}, {"raw_", IP}, {"icmp_", IP}, {"ip4_", IP}, {"ipv4_", IP}, {"l3mdev_", IP},
	{"nf_hook", Netfilter}, {"nft_", Netfilter}, {"__nft_", Netfilter}, {"nf_tables_", Netfilter},
	{"ipt_", Netfilter}, {"ip6t_", Netfilter}, {"xt_", Netfilter}, {"nf_", Netfilter}, {"__nf_", Netfilter},
	{"iptable_", Netfilter}, {"ip6table_", Netfilter}, {"ebt_", Netfilter}, {"br_nf_", Netfilter},
	{"nf_conntrack", Conntrack}, {"__nf_conntrack", Conntrack}, {"nf_ct_", Conntrack}, {"__nf_ct_", Conntrack},
	{"ipv4_conntrack", Conntrack}, {"ipv6_conntrack", Conntrack},
	{"nf_confirm", Conntrack}, {"hash_conntrack", Conntrack}, {"init_conntrack", Conntrack},
	{"resolve_normal_ct", Conntrack}, {"nf_nat", NAT}, {"__nf_nat", NAT}, {"nft_nat", NAT},
	{"nf_xfrm_me_harder", NAT}, {"nft_masq", NAT}, {"masquerade_", NAT}, {"nf_nat_ipv4", NAT},
	{"veth_", Veth},
	{"br_", Bridge}, {"__br_", Bridge}, {"nbp_", Bridge},
	{"vxlan_", Tunnel}, {"__vxlan", Tunnel}, {"geneve_", Tunnel}, {"udp_tunnel", Tunnel}, {"ip_tunnel", Tunnel},
	{"iptunnel_", Tunnel}, {"gro_cell", Tunnel}, {"ipip_", Tunnel}, {"gre_", Tunnel}, {"xfrm", Tunnel},
	{"esp_", Tunnel}, {"esp4_", Tunnel},
	{"ovs_", OVS}, {"__ovs_", OVS}, {"queue_userspace_packet", OVS}, {"do_execute_actions", OVS},
	{"bpf_prog_", BPF}, {"bpf_", BPF}, {"__bpf_", BPF}, {"tcx_", BPF}, {"xdp_", BPF}, {"cls_bpf", BPF},
	{"napi_", Softirq}, {"__napi_", Softirq}, {"netif_", Softirq}, {"__netif_", Softirq},
	{"dev_", Netdev}, {"__dev_", Netdev}, {"qdisc_", Netdev}, {"pfifo_", Netdev}, {"fq_codel_", Netdev},
	{"noqueue_", Netdev}, {"netdev_", Netdev}, {"loopback_", Netdev},
	{"ttwu_", Wakeup}, {"__wake_up", Wakeup}, {"wake_up_", Wakeup},
	{"pick_next_", Scheduler}, {"__pick_next", Scheduler}, {"enqueue_task", Scheduler},
	{"dequeue_task", Scheduler}, {"check_preempt", Scheduler}, {"wakeup_preempt", Scheduler},
	{"select_task_rq", Scheduler}, {"update_rq_clock", Scheduler}, {"psi_", Scheduler},
	{"sched_", Scheduler}, {"__sched", Scheduler}, {"prepare_task_switch", Scheduler}, {"pick_task", Scheduler},
	{"pick_eevdf", Scheduler}, {"update_cfs", Scheduler}, {"reweight_", Scheduler}, {"place_entity", Scheduler},
	{"cpuidle_", Idle}, {"tick_nohz_idle", Idle}, {"haltpoll_", Idle},
}

// helpers never name a stage: their time belongs to whoever called them
// (a lock released by try_to_wake_up is the wake-up's cost).
var helpers = nameSet{exact: setOf(
	"finish_task_switch", "__local_bh_enable_ip", "local_bh_enable", "__rcu_read_lock", "__rcu_read_unlock",
	"rcu_read_unlock_strict", "lock_sock_nested", "release_sock", "__release_sock", "lock_acquire",
	"lock_release", "memcpy", "memset", "memmove", "memcpy_orig", "memset_orig", "__memcpy", "__memset",
	"kfree", "kmalloc_reserve", "__kmalloc_node_track_caller", "kmem_cache_alloc_node", "kmem_cache_free",
	"kmem_cache_alloc", "__slab_free", "___slab_alloc", "page_frag_alloc_align", "__page_frag_alloc_align",
	"check_heap_object", "__check_heap_object", "__virt_addr_valid", "irqentry_exit",
	"irqentry_exit_to_user_mode", "irqentry_enter", "asm_common_interrupt", "common_interrupt",
	"asm_sysvec_apic_timer_interrupt", "sysvec_apic_timer_interrupt", "__sysvec_apic_timer_interrupt",
	"ktime_get", "read_tsc", "kvm_clock_get_cycles", "kvm_clock_read", "pvclock_clocksource_read",
	"pvclock_clocksource_read_nowd", "native_read_msr", "native_write_msr", "__cond_resched", "_cond_resched",
	"refill_stock", "mod_memcg_state", "__mod_memcg_state", "__mod_memcg_lruvec_state",
	"mem_cgroup_charge_skmem", "mem_cgroup_uncharge_skmem", "try_charge_memcg",
), prefixes: []string{
	"_raw_spin_", "raw_spin_", "__raw_spin_", "_raw_read_", "_raw_write_", "queued_spin_", "queued_read_",
	"queued_write_", "native_queued_spin_", "__pv_queued_spin_", "pv_queued_spin_", "preempt_", "__preempt_",
	"native_irq_", "arch_local_irq", "local_irq_", "trace_hardirqs_", "lockdep_", "rcu_", "__rcu_",
	"mutex_", "__mutex_", "down_", "up_", "srso_", "__x86_return_thunk", "__x86_indirect_thunk",
	"asm_exc_", "entry_IBPB", "clear_bhb_loop", "__kmalloc", "kmalloc_", "__kmem_cache", "kmem_cache_",
	"__alloc_pages", "alloc_pages", "get_page_from_freelist", "free_unref_page", "__free_pages", "page_counter_",
	"memcg_", "__memcg_", "obj_cgroup_", "percpu_counter_", "__percpu_counter_", "refcount_",
}}

// nameSet matches names exactly or by prefix.
type nameSet struct {
	exact    map[string]bool
	prefixes []string
}

// setOf is the set of names, for nameSet.exact.
func setOf(names ...string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

func (n nameSet) has(name string) bool {
	if n.exact[name] {
		return true
	}
	for _, p := range n.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Normalize removes the compiler's clone suffixes (".isra.0",
// ".constprop.0", ".part.0", ".cold") so a table entry covers every clone.
func Normalize(fn string) string {
	if i := strings.IndexByte(fn, '.'); i > 0 {
		return fn[:i]
	}
	return fn
}

// IsHelper reports whether fn is a lock, irq, preemption, RCU or
// allocator helper that never names a stage.
func IsHelper(fn string) bool {
	return helpers.has(Normalize(fn))
}

// Of returns the stage a kernel function names, or "" for a helper or a
// function the table does not know.
func Of(fn string) Stage {
	fn = Normalize(fn)
	if IsHelper(fn) {
		return ""
	}
	if s, ok := exact[fn]; ok {
		return s
	}
	best, bestLen := Stage(""), 0
	for _, r := range prefixes {
		if len(r.prefix) > bestLen && strings.HasPrefix(fn, r.prefix) {
			best, bestLen = r.stage, len(r.prefix)
		}
	}
	return best
}
