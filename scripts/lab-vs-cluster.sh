#!/usr/bin/env bash
# The lab checked against the real thing: the lab's vxlan and native presets
# (cnibench run) and the k8slab cluster's Flannel vxlan and host-gw
# (cnibench k8s run, pod-cross-node), the same tests and sizes, then the two
# ratios — lab vxlan/native and Flannel vxlan/host-gw — side by side with
# each median's 95% confidence interval.
#
# Needs root; leaves the cluster down (not purged). Environment:
#   REPEATS=6 DURATION=1s SIZES=1,4K OUT=DIR CNB_LOCK=F (flock -x F around each measurement)
#   LAB_ONLY=1    measure and store the lab part only (no cluster needed); a later run
#                 with the same OUT reuses it
. "$(dirname "$0")/lib.sh"
cnb_script lab-vs-cluster
REPEATS=${REPEATS:-6}
DURATION=${DURATION:-1s}
SIZES=${SIZES:-1,4K}

need_root
find_k8slab
need_bin
need_tool jq
out_dir lab-vs-cluster
export CNIBENCH_DB=$OUT/results.db

sizes_yaml=$(echo "$SIZES" | sed 's/,/, /g')
cat >"$OUT/lab.yaml" <<EOF
name: lab-vxlan-vs-native
description: the lab's vxlan and native presets, pod to pod across nodes (what Flannel vxlan and host-gw are to k8slab)
tests: [tcp_lat, tcp_bw]
msg_sizes: [$sizes_yaml]
duration: $DURATION
warmup: 300ms
repeats: $REPEATS
baseline: native
arms:
  - {name: native, topology: native}
  - {name: vxlan, topology: vxlan}
EOF
# A lab run already in OUT's database (e.g. measured while the cluster was
# busy) is reused: the lab needs no cluster.
LAB=$("$BIN" runs 2>/dev/null | awk '/lab-vxlan-vs-native/ && /complete/ {print $1}' | tail -1)
if [ -z "$LAB" ]; then
  step "lab: native vs vxlan, $REPEATS repeats (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  locked "$BIN" run "$OUT/lab.yaml" >"$OUT/lab.txt" 2>"$OUT/lab.log" || { tail -3 "$OUT/lab.log"; fail "lab run"; }
  LAB=$("$BIN" runs 2>/dev/null | awk '/lab-vxlan-vs-native/ && /complete/ {print $1}' | tail -1)
  [ -n "$LAB" ] || fail "lab run not stored"
fi
if [ "${LAB_ONLY:-}" = 1 ]; then step "lab run $LAB stored in $OUT"; exit 0; fi

# Only from here on is the cluster ours: the lab part runs without the
# k8slab lock (LAB_ONLY=1), and a lab part that fails or is interrupted must
# not take down a cluster someone else brought up.
trap '"$K8SLAB" down >"$OUT/down.log" 2>&1 || true' EXIT

k8slab_logged "$OUT/build.log" build flannel
cp "$BIN" "$OUT/cnibench"; BIN=$OUT/cnibench
build_image "$OUT/cnibench-image.tar"
K=()
for CNI in flannel-host-gw flannel-vxlan; do
  step "$CNI: k8slab down; CNI=$CNI k8slab up"
  cluster_up "$OUT" "$CNI" "$OUT/cnibench-image.tar" CNI="$CNI"
  step "$CNI: pod-cross-node, $REPEATS repeats (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  locked "$BIN" k8s run --image "$REF" --image-pull-policy Never --scenarios pod-cross-node --test tcp_lat,tcp_bw --msg-size "$SIZES" \
    --duration "$DURATION" --warmup 300ms --repeats "$REPEATS" --json >"$OUT/run-$CNI.json" 2>"$OUT/run-$CNI.log" \
    || { tail -3 "$OUT/run-$CNI.log"; fail "k8s run $CNI"; }
  K+=("$(run_name "$OUT/run-$CNI.json")")
done

step "ratios"
"$BIN" report "$LAB" --format csv >"$OUT/lab.csv"
"$BIN" report "${K[0]}" "${K[1]}" --format csv >"$OUT/k8s.csv"
# median ci_low ci_high of one cell of a CSV report: file run-name|- arm test size metric
# (quoted fields may hold commas: those become ';' first)
cell() { awk -F'"' 'BEGIN{OFS=""} {for(i=2;i<=NF;i+=2) gsub(",",";",$i); print}' "$1" |
  awk -F, -v run="$2" -v arm="$3" -v t="$4" -v z="$5" -v m="$6" \
    '(run=="-" || $2==run) && $5==arm && $6==t && $7==z && $8==m {printf "%s %s %s", $10, $11, $12}'; }
{
  echo "| test | size | metric | lab native | lab vxlan | lab vxlan/native | flannel host-gw | flannel vxlan | flannel vxlan/host-gw | agree within 15 %? |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for t in tcp_lat tcp_bw; do
    m=one_way_mean_us; [ $t = tcp_bw ] && m=receiver_mbps
    for z in $(echo "$SIZES" | tr , ' ' | sed 's/K/*1024/g'); do
      z=$((z))
      read -r ln lnl lnh <<<"$(cell "$OUT/lab.csv" - native $t $z $m)"
      read -r lv lvl lvh <<<"$(cell "$OUT/lab.csv" - vxlan $t $z $m)"
      read -r kh khl khh <<<"$(cell "$OUT/k8s.csv" "${K[0]}" pod-cross-node $t $z $m)"
      read -r kv kvl kvh <<<"$(cell "$OUT/k8s.csv" "${K[1]}" pod-cross-node $t $z $m)"
      awk -v t=$t -v z=$z -v m=$m -v ln=$ln -v lnl=$lnl -v lnh=$lnh -v lv=$lv -v lvl=$lvl -v lvh=$lvh \
          -v kh=$kh -v khl=$khl -v khh=$khh -v kv=$kv -v kvl=$kvl -v kvh=$kvh 'BEGIN {
        rl = lv/ln; rk = kv/kh; d = rl/rk - 1; if (d < 0) d = -d
        printf "| %s | %d | %s | %.3g [%.3g, %.3g] | %.3g [%.3g, %.3g] | %.2f | %.3g [%.3g, %.3g] | %.3g [%.3g, %.3g] | %.2f | %s (%.0f %%) |\n",
          t, z, m, ln, lnl, lnh, lv, lvl, lvh, rl, kh, khl, khh, kv, kvl, kvh, rk, (d <= 0.15 ? "yes" : "no"), d*100 }'
    done
  done
} | tee "$OUT/ratios.md"
step "done; results in $OUT (lab run $LAB, k8s runs ${K[*]})"
