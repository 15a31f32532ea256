#!/usr/bin/env bash
# make bench-lab: build and tear down the vxlan preset and a 2-node x 50-pod
# bridge topology with cnibench and with the equivalent iproute2 script
# (scripts/lab-iproute2.sh), alternating, REPEAT times each; print the median
# wall times (process start to exit, up and down) and the ratios.
# Target: cnibench <= 0.5 x iproute2 for each topology.
. "$(dirname "$0")/lib.sh"
cnb_script bench-lab
REPEAT=${REPEAT:-5}
need_root
need_bin

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'topology: bridge\nnodes: 2\npods_per_node: 50\n' >"$tmp/bridge2x50.yaml"

now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000 )); } # microseconds
newid() { printf '%04x' $((RANDOM % 65536)); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# run_one TOOL TOPO -> appends "up_us down_us" to $tmp/TOOL-TOPO
run_one() {
  local tool=$1 topo=$2 id t0 t1 t2
  id=$(newid)
  if [ "$tool" = cnibench ]; then
    local arg=vxlan
    [ "$topo" = bridge2x50 ] && arg=$tmp/bridge2x50.yaml
    t0=$(now); "$BIN" lab up "$arg" --name "bench-$id" -q >/dev/null
    t1=$(now); "$BIN" lab down "bench-$id" >/dev/null
    t2=$(now)
  else
    t0=$(now); scripts/lab-iproute2.sh up "$topo" "$id"
    t1=$(now); scripts/lab-iproute2.sh down "$topo" "$id"
    t2=$(now)
  fi
  echo "$(ms "$t0" "$t1") $(ms "$t1" "$t2")" >>"$tmp/$tool-$topo"
}

for topo in vxlan bridge2x50; do
  for _ in $(seq "$REPEAT"); do
    run_one iproute2 "$topo"
    run_one cnibench "$topo"
  done
done

printf '%-12s %-9s %12s %12s %12s\n' topology tool "up ms" "down ms" "total ms"
fail=0
for topo in vxlan bridge2x50; do
  declare -A tot=()
  for tool in iproute2 cnibench; do
    f=$tmp/$tool-$topo
    up=$(awk '{print $1}' "$f" | median)
    dn=$(awk '{print $2}' "$f" | median)
    tt=$(awk '{print $1+$2}' "$f" | median)
    tot[$tool]=$tt
    awk -v t="$topo" -v n="$tool" -v u="$up" -v d="$dn" -v s="$tt" \
      'BEGIN {printf "%-12s %-9s %12.1f %12.1f %12.1f\n", t, n, u/1000, d/1000, s/1000}' 
  done
  line=$(awk -v t="$topo" -v c="${tot[cnibench]}" -v i="${tot[iproute2]}" \
    'BEGIN {r = c / i; printf "%-12s ratio cnibench/iproute2 = %.3f (target <= 0.5): %s\n", t, r, (r <= 0.5 ? "PASS" : "FAIL")}')
  echo "$line"
  case $line in *FAIL) fail=1 ;; esac
  unset tot
done
echo "(medians of $REPEAT alternating runs; wall time from process start to exit)"

# kube-proxy at scale: native with 30,000 Services in nftables mode on both
# nodes (issue 11's target: up <= 2 s, down <= 1 s). Reported, not gated:
# on this kernel the nftables commit alone takes longer (docs/lab.md).
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
t0=$(now_ms); "$BIN" lab up native --set proxy=nftables --set services=30000 --name bench-kp -q >/dev/null
t1=$(now_ms); "$BIN" lab down bench-kp >/dev/null
t2=$(now_ms)
printf '%-12s %-9s %12.1f %12.1f %12.1f\n' kp-nft30k cnibench "$((t1 - t0))" "$((t2 - t1))" "$((t2 - t0))"
echo "kp-nft30k: native, proxy=nftables services=30000 on both nodes (target up <= 2000 ms, down <= 1000 ms; one run)"
exit $fail
