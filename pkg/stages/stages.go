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

// exact maps whole function names.
var exact = map[string]Stage{
	// syscall entry/exit
	"entry_SYSCALL_64": Syscall, "entry_SYSCALL_64_after_hwframe": Syscall, "do_syscall_64": Syscall,
	"syscall_exit_to_user_mode": Syscall, "syscall_exit_to_user_mode_prepare": Syscall,
	"exit_to_user_mode_prepare": Syscall, "exit_to_user_mode_loop": Syscall, "x64_sys_call": Syscall,
	"syscall_enter_from_user_mode": Syscall, "ret_from_fork": Syscall,
	// socket and copy
	"copy_to_user": Socket, "copy_from_user": Socket, "_copy_to_user": Socket, "_copy_from_user": Socket,
	"_copy_to_iter": Socket, "_copy_from_iter": Socket, "copy_user_enhanced_fast_string": Socket,
	"copy_user_generic_unrolled": Socket, "rep_movs_alternative": Socket, "simple_copy_to_iter": Socket,
	"__check_object_size": Socket, "__sys_sendto": Socket, "__sys_recvfrom": Socket, "__sys_sendmsg": Socket,
	"__sys_recvmsg": Socket, "__sys_connect": Socket, "__sys_accept4": Socket, "__sys_socket": Socket,
	"___sys_sendmsg": Socket, "___sys_recvmsg": Socket, "do_sock_setsockopt": Socket,
	"ksys_read": Socket, "ksys_write": Socket, "vfs_read": Socket, "vfs_write": Socket,
	"sock_read_iter": Socket, "sock_write_iter": Socket, "sockfd_lookup_light": Socket,
	"__fput": Socket, "__sock_release": Socket, "inet_release": Socket, "inet_sendmsg": Socket,
	"inet_recvmsg": Socket, "inet6_sendmsg": Socket, "inet6_recvmsg": Socket, "inet_stream_connect": Socket,
	"__inet_stream_connect": Socket, "inet_accept": Socket, "do_accept": Socket,
	// netfilter hooks
	"nf_hook_slow": Netfilter, "nft_do_chain": Netfilter, "ipt_do_table": Netfilter, "ip6t_do_table": Netfilter,
	"nf_hook_slow_list": Netfilter, "br_nf_pre_routing": Netfilter, "br_nf_forward_ip": Netfilter,
	// veth
	"veth_xmit": Veth, "veth_poll": Veth, "veth_xdp_rcv": Veth,
	// softirq / NAPI / backlog
	"net_rx_action": Softirq, "process_backlog": Softirq, "__napi_poll": Softirq, "napi_poll": Softirq,
	"do_softirq": Softirq, "__do_softirq": Softirq, "handle_softirqs": Softirq, "run_ksoftirqd": Softirq,
	"net_tx_action": Softirq, "enqueue_to_backlog": Softirq, "netif_rx": Softirq, "netif_rx_internal": Softirq,
	"__netif_rx": Softirq, "napi_complete_done": Softirq, "napi_schedule_prep": Softirq,
	"__napi_schedule": Softirq, "____napi_schedule": Softirq, "napi_gro_receive": Netdev,
	"irq_exit_rcu": Softirq, "__irq_exit_rcu": Softirq, "do_softirq.part.0": Softirq,
	// wake-ups
	"try_to_wake_up": Wakeup, "wake_up_process": Wakeup, "wake_up_q": Wakeup, "default_wake_function": Wakeup,
	"autoremove_wake_function": Wakeup, "woken_wake_function": Wakeup, "pollwake": Wakeup, "ep_poll_callback": Wakeup,
	"sock_def_readable": Wakeup, "sock_def_write_space": Wakeup, "sk_stream_write_space": Wakeup,
	"tcp_data_ready": Wakeup, "sock_def_wakeup": Wakeup, "native_send_call_func_single_ipi": Wakeup,
	"send_call_function_single_ipi": Wakeup, "__smp_call_single_queue": Wakeup, "ttwu_queue_wakelist": Wakeup,
	"ttwu_do_activate": Wakeup, "ttwu_queue": Wakeup, "x2apic_send_IPI": Wakeup, "kvm_send_ipi_mask": Wakeup,
	"__wake_up": Wakeup, "__wake_up_common": Wakeup, "__wake_up_common_lock": Wakeup, "__wake_up_sync_key": Wakeup,
	"__wake_up_sync": Wakeup, "wake_up_bit": Wakeup, "irq_work_queue": Wakeup,
	// scheduler
	"schedule": Scheduler, "__schedule": Scheduler, "schedule_timeout": Scheduler,
	"schedule_hrtimeout_range": Scheduler, "schedule_hrtimeout_range_clock": Scheduler, "do_nanosleep": Scheduler,
	"context_switch": Scheduler, "__switch_to": Scheduler, "__switch_to_asm": Scheduler,
	"update_curr": Scheduler, "update_load_avg": Scheduler, "enqueue_entity": Scheduler, "dequeue_entity": Scheduler,
	"set_next_entity": Scheduler, "put_prev_entity": Scheduler, "newidle_balance": Scheduler,
	"sched_balance_newidle": Scheduler, "sched_balance_rq": Scheduler, "load_balance": Scheduler,
	"scheduler_tick": Scheduler, "sched_tick": Scheduler, "task_tick_fair": Scheduler, "yield_task_fair": Scheduler,
	"do_sched_yield": Scheduler, "sched_ttwu_pending": Scheduler, "__flush_smp_call_function_queue": Wakeup,
	"flush_smp_call_function_queue": Wakeup, "generic_smp_call_function_single_interrupt": Wakeup,
	"__sysvec_call_function_single": Wakeup, "sysvec_call_function_single": Wakeup,
	"asm_sysvec_call_function_single": Wakeup, "sysvec_reschedule_ipi": Wakeup, "asm_sysvec_reschedule_ipi": Wakeup,
	"futex_wait": Scheduler, "futex_wake": Wakeup, "futex_wait_queue": Scheduler, "do_futex": Scheduler,
	"do_epoll_wait": Scheduler, "ep_poll": Scheduler, "do_select": Scheduler, "do_sys_poll": Scheduler,
	"core_sys_select": Scheduler, "do_poll": Scheduler,
	// idle
	"pv_native_safe_halt": Idle, "native_safe_halt": Idle, "default_idle": Idle, "default_idle_call": Idle,
	"arch_cpu_idle": Idle, "do_idle": Idle, "cpu_startup_entry": Idle, "cpuidle_enter": Idle,
	"cpuidle_enter_state": Idle, "cpuidle_idle_call": Idle, "haltpoll_enter_idle": Idle, "poll_idle": Idle,
	"intel_idle": Idle, "acpi_idle_enter": Idle, "mwait_idle": Idle, "start_secondary": Idle,
	"rest_init": Idle, "x86_64_start_kernel": Idle, "kvm_wait": Idle, "amd_e400_idle": Idle,
	"common_startup_64": Idle, "secondary_startup_64_no_verify": Idle, "cpuidle_poll_time": Idle,
	// netdev: device layer and qdisc
	"dev_queue_xmit": Netdev, "__dev_queue_xmit": Netdev, "dev_hard_start_xmit": Netdev, "sch_direct_xmit": Netdev,
	"__qdisc_run": Netdev, "validate_xmit_skb": Netdev, "netif_receive_skb": Softirq,
	"__netif_receive_skb": Softirq, "__netif_receive_skb_core": Softirq, "__netif_receive_skb_one_core": Softirq,
	"netif_receive_skb_list_internal": Softirq, "__netif_receive_skb_list_core": Softirq,
	"gro_normal_list": Netdev, "dev_gro_receive": Netdev, "napi_gro_complete": Netdev,
	"skb_gro_receive": Netdev, "inet_gro_receive": Netdev, "tcp_gro_receive": Netdev, "tcp4_gro_receive": Netdev,
	"udp_gro_receive": Netdev, "udp4_gro_receive": Netdev, "netdev_core_pick_tx": Netdev,
	"skb_segment": Netdev, "__skb_gso_segment": Netdev, "skb_mac_gso_segment": Netdev, "inet_gso_segment": Netdev,
	"tcp_gso_segment": Netdev, "tcp4_gso_segment": Netdev, "dev_forward_skb": Veth, "__dev_forward_skb": Veth,
	"__dev_forward_skb2": Veth, "eth_type_trans": Netdev,
	// eBPF hooks
	"tcf_classify": BPF, "tcx_run": BPF, "sch_handle_ingress": BPF, "sch_handle_egress": BPF,
	"cls_bpf_classify": BPF, "bpf_dispatcher_xdp_func": BPF, "do_xdp_generic": BPF, "bpf_prog_run_generic_xdp": BPF,
	"__bpf_prog_run": BPF, "tcf_bpf_act": BPF, "skb_do_redirect": BPF,
	// IP & routing
	"dst_output": IP, "dst_input": IP, "neigh_resolve_output": IP, "neigh_hh_output": IP,
	"__neigh_event_send": IP, "neigh_output": IP,
	// tunnels
	"udp_tunnel_xmit_skb": Tunnel, "iptunnel_xmit": Tunnel, "__iptunnel_pull_header": Tunnel,
	"iptunnel_handle_offloads": Tunnel, "udp_tunnel_nic_work": Tunnel,
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
var helpers = nameSet{exact: map[string]bool{
	"finish_task_switch": true, "__local_bh_enable_ip": true, "local_bh_enable": true, "__rcu_read_lock": true,
	"__rcu_read_unlock": true, "rcu_read_unlock_strict": true, "lock_sock_nested": true, "release_sock": true,
	"__release_sock": true, "lock_acquire": true, "lock_release": true, "memcpy": true, "memset": true,
	"memmove": true, "memcpy_orig": true, "memset_orig": true, "__memcpy": true, "__memset": true,
	"kfree": true, "kmalloc_reserve": true, "__kmalloc_node_track_caller": true, "kmem_cache_alloc_node": true,
	"kmem_cache_free": true, "kmem_cache_alloc": true, "__slab_free": true, "___slab_alloc": true,
	"page_frag_alloc_align": true, "__page_frag_alloc_align": true, "check_heap_object": true,
	"__check_heap_object": true, "__virt_addr_valid": true, "irqentry_exit": true, "irqentry_exit_to_user_mode": true,
	"irqentry_enter": true, "asm_common_interrupt": true, "common_interrupt": true,
	"asm_sysvec_apic_timer_interrupt": true, "sysvec_apic_timer_interrupt": true,
	"__sysvec_apic_timer_interrupt": true, "ktime_get": true, "read_tsc": true, "kvm_clock_get_cycles": true,
	"kvm_clock_read": true, "pvclock_clocksource_read": true, "pvclock_clocksource_read_nowd": true,
	"native_read_msr": true, "native_write_msr": true, "__cond_resched": true, "_cond_resched": true,
	"refill_stock": true, "mod_memcg_state": true, "__mod_memcg_state": true, "__mod_memcg_lruvec_state": true,
	"mem_cgroup_charge_skmem": true, "mem_cgroup_uncharge_skmem": true, "try_charge_memcg": true,
}, prefixes: []string{
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
