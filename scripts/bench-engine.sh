#!/usr/bin/env bash
# bench-engine: measure one veth path between two network namespaces with
# cnibench and with the reference tools (sockperf, qperf, iperf3), in the same
# run, alternating tools round by round (A B A B) so drift and the noise of a
# shared VM hit every tool alike. Prints each figure and each ratio against
# the engine's targets. Everything it creates is named cnb-<id>-… and removed
# on exit, failure or Ctrl-C.
#
#   ROUNDS=3 DUR=3 scripts/bench-engine.sh        (as root)
#   PARTS=tcp_bw BW_SIZES="16K 1M" scripts/bench-engine.sh   (a subset)
#   PIN="0 1" …   client on CPU 0, server on CPU 1 (PIN="" unpins)
#
# tcp_bw is compared with iperf3 at every size of BW_SIZES, the same write
# size on both (cnibench --msg-size = iperf3 -l), the two alternating within
# each size and the first of them alternating from round to round.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cnb_script bench-engine
DUR=${DUR:-3}          # seconds per measurement
ROUNDS=${ROUNDS:-3}    # alternations per tool
# Every tool, server and client alike, runs at this nice level: on a shared
# VM it keeps other jobs' CPU bursts from landing in one tool's round more
# than another's. NICE=0 measures without it.
NICE=${NICE:--15}
PARTS=${PARTS:-"lat tcp_bw udp_bw"}     # which comparisons to run
BW_SIZES=${BW_SIZES:-"16K 64K 128K 1M"}  # tcp_bw write sizes, both tools
part() { [[ " $PARTS " == *" $1 "* ]]; }
# Every tool runs pinned the same way, client on one CPU and server on
# another, as cnibench's own runs place them by default (client on CPU n-2,
# server on n-1): unpinned, which CPUs the scheduler picks for each tool's
# threads differs from round to round and tool to tool. PIN="" unpins.
ncpu=$(nproc)
PIN=${PIN-$( ((ncpu >= 2)) && echo "$((ncpu - 2)) $((ncpu - 1))")}
CPIN=(); SPIN=()
if [ -n "$PIN" ]; then read -r pc ps <<<"$PIN"; CPIN=(taskset -c "$pc"); SPIN=(taskset -c "$ps"); fi
need_root "network namespaces"
need_bin
for t in sockperf qperf iperf3 jq; do
  command -v $t >/dev/null || { echo "bench-engine: $t missing; run make deps" >&2; exit 1; }
done

id=$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
S=cnb-$id-srv; C=cnb-$id-cli
SIP=10.201.77.1; CIP=10.201.77.2
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del "$S" 2>/dev/null || true
  ip netns del "$C" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$S"; ip netns add "$C"
ip link add "cnb-$id-s" netns "$S" type veth peer name "cnb-$id-c" netns "$C"
ip -n "$S" addr add $SIP/24 dev "cnb-$id-s"; ip -n "$C" addr add $CIP/24 dev "cnb-$id-c"
for n in "$S" "$C"; do ip -n "$n" link set lo up; done
ip -n "$S" link set "cnb-$id-s" up; ip -n "$C" link set "cnb-$id-c" up

srv() { nice -n "$NICE" ip netns exec "$S" "${SPIN[@]}" "$@" >/dev/null 2>&1 & pids+=($!); }
cli() { nice -n "$NICE" ip netns exec "$C" "${CPIN[@]}" "$@"; }
srv "$BIN" server --quiet --listen $SIP:7420
srv sockperf server -i $SIP -p 11111
srv sockperf server --tcp -i $SIP -p 11112
srv qperf
srv iperf3 -s -p 5201
sleep 1

# unit-aware qperf latency → µs ("latency = 8.71 us" or "870 ns")
qperf_us() { awk '/latency/ {v=$3; u=$4; if (u=="ns") v/=1000; if (u=="ms") v*=1000; print v; exit}'; }
sockperf_us() { sed -n 's/.*avg-latency=\([0-9.]*\).*/\1/p' | head -1; }
cnb() { cli "$BIN" client --server $SIP --duration ${DUR}s --warmup 500ms --json "$@"; }

declare -A V   # V[metric]="v1 v2 …"
add() { V[$1]="${V[$1]:-} $2"; printf '  %-28s %s\n' "$1" "$2"; }

cnb_bw() { add "cnb_tcp_bw_${1}_gbps" "$(cnb --test tcp_bw --msg-size "$1" | jq '.results[0].throughput.receiver_bps/1e9')"; }
iperf3_bw() { add "iperf3_tcp_${1}_gbps" "$(cli iperf3 -c $SIP -p 5201 -t "$DUR" -O 1 -l "$1" -J | jq '.end.sum_received.bits_per_second/1e9')"; }

for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS"
  if part lat; then
    add cnb_tcp_lat_us "$(cnb --test tcp_lat --msg-size 1 | jq '.results[0].latency.one_way_ns.mean/1000')"
    add sockperf_tcp_us "$(cli sockperf ping-pong --tcp -i $SIP -p 11112 -m 14 -t "$DUR" 2>&1 | sockperf_us)"
    add qperf_tcp_lat_us "$(cli qperf $SIP -t "$DUR" -m 1 tcp_lat | qperf_us)"
    add cnb_udp_lat_us "$(cnb --test udp_lat --msg-size 1 | jq '.results[0].latency.one_way_ns.mean/1000')"
    add sockperf_udp_us "$(cli sockperf ping-pong -i $SIP -p 11111 -m 14 -t "$DUR" 2>&1 | sockperf_us)"
    add qperf_udp_lat_us "$(cli qperf $SIP -t "$DUR" -m 1 udp_lat | qperf_us)"
  fi
  if part tcp_bw; then
    for sz in $BW_SIZES; do
      if (( r % 2 )); then cnb_bw "$sz"; iperf3_bw "$sz"; else iperf3_bw "$sz"; cnb_bw "$sz"; fi
    done
  fi
  if part udp_bw; then
    u=$(cnb --test udp_bw --msg-size 64)
    add cnb_udp_bw_kpps "$(jq '.results[0].throughput.receiver_pps/1000' <<<"$u")"
    echo "    cnibench udp_bw: $(jq -r '.results[0].udp | "sent \(.sent) received \(.received) lost \(.lost) ooo \(.out_of_order) dup \(.duplicated) kernel RcvbufErrors \(.kernel_rcvbuf_errors) InErrors \(.kernel_in_errors)"' <<<"$u")"
    acc=$(jq '.results[0].udp | if (.sent - .received == .lost) and (.lost == .kernel_in_errors) then 1 else 0 end' <<<"$u")
    add cnb_udp_lost_accounted "$acc"
    add iperf3_udp_kpps "$(cli iperf3 -c $SIP -p 5201 -u -b 0 -l 64 -t "$DUR" -J | jq '.end.sum as $s | ($s.packets - $s.lost_packets)/$s.seconds/1000')"
  fi
done

med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
m() { med <<<"${V[$1]}"; }
echo
echo "medians over $ROUNDS rounds of ${DUR}s at nice $NICE (veth between two namespaces; sockperf at its 14 B minimum)"
for k in "${!V[@]}"; do printf '  %-28s %s\n' "$k" "$(m "$k")"; done | sort
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a/b}'; }
minof() { awk -v a="$1" -v b="$2" 'BEGIN {print (a<b)?a:b}'; }
verdict() { awk -v r="$1" -v t="$2" -v op="$3" 'BEGIN {ok = (op=="<=") ? (r<=t) : (r>=t); print ok ? "MET" : "MISSED"}'; }
lo() { tr ' ' '\n' <<<"${V[$1]}" | grep -v '^$' | sort -g | head -1; }   # best latency of the rounds
hi() { tr ' ' '\n' <<<"${V[$1]}" | grep -v '^$' | sort -g | tail -1; }   # best rate of the rounds
report() { # label, median ratio, best-of ratio, target, op
  printf '%-48s median %s  best-of %s  (target %s %s) %s\n' "$1" "$2" "$3" "$5" "$4" "$(verdict "$2" "$4" "$5")"
}
echo "ratios: median of rounds against median; best-of = best round of each tool (discounts interference)"
if part lat; then
  report "tcp_lat 1B one-way mean / min(sockperf, qperf)" \
    "$(ratio "$(m cnb_tcp_lat_us)" "$(minof "$(m sockperf_tcp_us)" "$(m qperf_tcp_lat_us)")")" \
    "$(ratio "$(lo cnb_tcp_lat_us)" "$(minof "$(lo sockperf_tcp_us)" "$(lo qperf_tcp_lat_us)")")" 1.03 '<='
  report "udp_lat 1B one-way mean / min(sockperf, qperf)" \
    "$(ratio "$(m cnb_udp_lat_us)" "$(minof "$(m sockperf_udp_us)" "$(m qperf_udp_lat_us)")")" \
    "$(ratio "$(lo cnb_udp_lat_us)" "$(minof "$(lo sockperf_udp_us)" "$(lo qperf_udp_lat_us)")")" 1.03 '<='
fi
# pairmed A B: the median of A/B over the rounds, each round's two figures
# taken minutes apart at most (what interleaving is for).
pairmed() { paste <(tr ' ' '\n' <<<"${V[$1]}" | grep -v '^$') <(tr ' ' '\n' <<<"${V[$2]}" | grep -v '^$') |
  awk '{printf "%s ", $1/$2}' | med | awk '{printf "%.3f", $1}'; }
if part tcp_bw; then
  for sz in $BW_SIZES; do
    a=cnb_tcp_bw_${sz}_gbps b=iperf3_tcp_${sz}_gbps
    report "tcp_bw 1 stream, $sz writes / iperf3 -l $sz" "$(ratio "$(m $a)" "$(m $b)")" "$(ratio "$(hi $a)" "$(hi $b)")" 1.00 '>='
    printf '%-48s median of the rounds'"'"' own ratios %s\n' "" "$(pairmed $a $b)"
  done
fi
if part udp_bw; then
  report "udp_bw 64B received pps / iperf3" \
    "$(ratio "$(m cnb_udp_bw_kpps)" "$(m iperf3_udp_kpps)")" "$(ratio "$(hi cnb_udp_bw_kpps)" "$(hi iperf3_udp_kpps)")" 1.5 '>='
  bad=$(tr ' ' '\n' <<<"${V[cnb_udp_lost_accounted]}" | grep -c '^0$' || true)
  printf 'udp_bw rounds where lost != sent-received or != kernel InErrors: %s of %s\n' "$bad" "$ROUNDS"
fi
