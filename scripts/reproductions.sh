#!/usr/bin/env bash
# Regenerates docs/reproductions.md: runs every ready experiment on this host
# with cnibench and writes each seed document's table shape beside this host's
# reproduction, rendered by `cnibench report --format markdown`.
#
# Usage: sudo scripts/reproductions.sh [experiment ...]   (default: all)
# Env:   DB=path (default a fresh file under /tmp), BIN=cnibench binary.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/cnibench}
DB=${DB:-/tmp/cnibench-repro-$$.db}
OUT=${OUT:-docs/reproductions.md}
[ -x "$BIN" ] || { echo "reproductions: $BIN not built: run make build" >&2; exit 1; }

exps=("$@")
[ ${#exps[@]} -gt 0 ] || exps=(kube-ovn-default-vs-optimized kube-ovn-overlay-underlay-host fastpath kube-proxy-modes network-policy-cost cilium-tunnel-modes ovs-userspace-udp kernel-vs-userspace pmd-sleep dpdk-rings crosscheck default)

intro() {
  case "$1" in
  default) cat <<'T'
The README's main job. Not a seed table: the single-host floor of each datapath
against loopback, with the four qperf metrics at 1 byte.
T
  ;;
  kube-ovn-default-vs-optimized) cat <<'T'
**Source:** seed 000 (Kube-OVN "Performance Tuning"), first table: rows *Kube-OVN Default*,
*Kube-OVN Optimized*, *HOST Network*; columns tcp_lat (us), udp_lat (us), tcp_bw (Mb/s),
udp_bw (Mb/s), from `qperf -t 60 <server ip> -ub -oo msg_size:1 -vu tcp_lat tcp_bw udp_lat udp_bw`.
Its shape: Default has roughly twice the host's latency; Optimized comes within a few percent
of the host; bandwidth at 1 byte barely differs for TCP, while UDP bandwidth is several times
lower for Default. Here: Default = VXLAN pods with a conntrack rule in the nodes and kube-proxy
in iptables mode programming 1,000 Services; Optimized = VXLAN pods on cnibench's eBPF fast
path (no netfilter, no conntrack on pod traffic); HOST = node to node over the same underlay
with Default's rules on the nodes. tcp_crr is added: it is the test that pays for
connection tracking and for kube-proxy's per-connection rule walk.
T
  ;;
  fastpath) cat <<'T'
**Source:** Cilium's eBPF host routing (seed 004) and Kube-OVN's FastPath (seed 000): the
claim that bypassing the node's netfilter and routing brings pod traffic close to the host.
Here: cnibench's own tc programs (`fastpath=ebpf`) against the kernel's routing on the same
two-node lab, with and without a conntrack rule in the nodes, native and VXLAN.
T
  ;;
  network-policy-cost) cat <<'T'
No seed measures it: the cost of NetworkPolicy-style ingress filtering as the number of
allowed peers grows, written as one rule per peer (iptables-style implementations) or as one
hash-set lookup (ipset / nft sets). The policy sits in the server's node; the client is the
last allowed peer.
T
  ;;
  kube-proxy-modes) cat <<'T'
**Source:** the scaling shape the Kubernetes project published for kube-proxy's nftables
mode (KEP-3866): in iptables mode the first packet of each connection walks one rule per
service port, so connection setup slows as Services grow; nftables mode finds the Service
with one map lookup. Here: tcp_crr and tcp_lat to a Service VIP that sits behind N Services,
both modes programmed on both nodes as kube-proxy writes them.
T
  ;;
  kube-ovn-overlay-underlay-host) cat <<'T'
**Source:** seed 000, "Overlay and Underlay Comparison": three tables (msg_size 1, 1K, 4K),
rows *Overlay*, *Underlay*, *HOST Network*, same four qperf columns. Its shape: the three rows
within ~10–20% of each other at every size, the container rows sometimes ahead of the host
(the document attributes this to netfilter on the host path). Here: VXLAN pods, natively
routed pods and node-to-node over the same underlay (the honest HOST row for cross-node).
T
  ;;
  cilium-tunnel-modes) cat <<'T'
**Source:** seed 004 ("Tuning Kubernetes Cilium CNI deployment"): iperf3 bitrate, transfer and
sender/receiver CPU utilization for native routing vs VXLAN vs GENEVE. Its shape: native
routing about 4× the bitrate of either tunnel; VXLAN and GENEVE close to each other. This
kernel has no GENEVE, so that arm reports the reason, and OVS userspace GENEVE stands in.
T
  ;;
  ovs-userspace-udp) cat <<'T'
**Source:** seed 002 (Open vSwitch "Userspace UDP performance tuning"): iperf3 UDP across an OVS
`datapath_type=netdev` bridge between two namespaces; about two thirds of datagrams lost with
the default socket buffers, none after raising `rmem_max`/`wmem_max` (and OVS's
`userspace-sock-buf-size`, then restarting ovs-vswitchd). Here the buffer limits are swept
inside the lab's namespaces; loss is counted by sequence number and by the kernel's counters.
T
  ;;
  kernel-vs-userspace) cat <<'T'
**Source:** seed 003 (Red Hat, "DPDK datapaths in OVN-K8s"): kernel vs userspace datapath
throughput and where the CPU goes. Here: veth and Linux bridge vs OVS netdev and OVS-DPDK
(Debian's openvswitch-switch-dpdk, af_packet PMD ports) on the same host: latency, throughput
and the CPU each costs — the engine's and, for OVS-DPDK, ovs-vswitchd's with its PMD
("datapath CPU"). (No VDUSE on this host; see docs/lab.md.)
T
  ;;
  pmd-sleep) cat <<'T'
**Source:** seed 003 (Red Hat, "DPDK datapaths in OVN-K8s"): "increased CPU utilization due to
PMDs, which load-based sleeping lessens at the cost of wake-up latency". Here: one OVS-DPDK lab
with `pmd-maxsleep` 0, 50, 200 and 500 µs (knob `pmd_sleep`); tcp_lat and udp_lat at 1 byte
with ovs-vswitchd's CPU (PMD included) over each measured window beside them.
T
  ;;
  dpdk-rings) cat <<'T'
**Source:** seed 003 tunes the DPDK ports' queues. Here: one OVS-DPDK lab per arm whose af_packet
ports have receive and transmit rings of 64, 512 (DPDK's default) and 4,096 frames (knob
`ring_frames`); udp_bw (loss shows what the rings drop) and tcp_bw at 1 KiB.
T
  ;;
  crosscheck) cat <<'T'
Not a seed table: the built-in engine against qperf, sockperf and iperf3 on one veth pair,
interleaved in one run — the method behind the engine's accuracy claims.
T
  ;;
  esac
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
  echo "# Reproductions of the source documents' tables on this host"
  echo
  echo "Generated by \`scripts/reproductions.sh\` on $(date -u +%Y-%m-%d) with cnibench $($BIN version | awk '{print $2}')."
  echo "Each section names the seed table, describes its shape in words (its numbers come from"
  echo "other hardware and are not repeated here), and shows this host's reproduction as cnibench"
  echo "rendered it. Regenerate one section with the command under its heading."
  echo
  for e in "${exps[@]}"; do
    echo "## $e"
    echo
    intro "$e"
    echo
    echo '```sh'
    echo "sudo cnibench run $e && cnibench report last --format markdown"
    echo '```'
    echo
    if "$BIN" run "$e" --db "$DB" --format none >&2; then :; else echo "(run $e exited $?)" >&2; fi
    "$BIN" report last --db "$DB" --format markdown
    echo
  done
} > "$tmp"
mv "$tmp" "$OUT"
trap - EXIT
echo "wrote $OUT (results in $DB)" >&2
