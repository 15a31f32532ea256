#!/usr/bin/env bash
# kube-proxy's modes at scale on a real cluster (k8slab): tcp_crr and tcp_lat
# through a ClusterIP Service that sits behind N other Services (N = 0,
# 1,000, 10,000 by default), in iptables and in nftables mode, with
# pod-cross-node (no Service) measured in the same runs, interleaved.
#
#   for MODE in iptables nftables:
#     k8slab down; KUBE_PROXY_MODE=MODE CNI=$CNI k8slab up; import the image
#     for N in COUNTS: cnibench k8s run --scenarios pod-cross-node,service --services N
#   -> every run's detected kube-proxy mode is checked
#   -> one report of all runs side by side, and `cnibench compare` of each
#      run against the next and of the first against the last in each mode
#      (Mann–Whitney per cell). COUNTS may repeat a value: "0 10000 0" is an
#      A-B-A design, whose first-vs-last comparison shows the drift of the
#      host between the two N=0 runs.
#
# Needs root. Leaves the cluster down (not purged). Environment:
#   MODES="iptables nftables" COUNTS="0 1000 10000" REPEATS=4 DURATION=1s CNI=bridge
#   SETTLE=PCT    --settle-idle PCT (default 70; 0 = off): measure only once the
#                 client node is that idle, not while kube-proxy and the API
#                 server still digest the N Services
#   AGENTS=1      --agent-cpu (default 1): kube-proxy's CPU in every window
#   OUT=DIR       keeps results.db, the runs' JSON and the reports (default: a temp dir, printed)
#   CNB_LOCK=F    hold `flock -x F` around each measured run (a shared machine's CPU lock)
. "$(dirname "$0")/lib.sh"
cnb_script k8s-proxy-scale
MODES=${MODES:-iptables nftables}
COUNTS=${COUNTS:-0 1000 10000}
REPEATS=${REPEATS:-4}
DURATION=${DURATION:-1s}
CNI=${CNI:-bridge}
SETTLE=${SETTLE:-70}
AGENTS=${AGENTS:-1}
EXTRA=(--settle-idle "$SETTLE")
[ "$AGENTS" = 1 ] && EXTRA+=(--agent-cpu)

need_root k8slab
find_k8slab
need_bin
need_tool jq
out_dir proxy-scale
export CNIBENCH_DB=$OUT/results.db
trap '"$K8SLAB" down >"$OUT/down.log" 2>&1 || true' EXIT

k8slab_logged "$OUT/build.log" build
# A private copy: rebuilding bin/cnibench during the runs must not change
# the binary or the image reference under them.
cp "$BIN" "$OUT/cnibench"; BIN=$OUT/cnibench
build_image "$OUT/cnibench-image.tar"
for MODE in $MODES; do
  step "$MODE: k8slab down; KUBE_PROXY_MODE=$MODE CNI=$CNI k8slab up"
  cluster_up "$OUT" "$MODE" "$OUT/cnibench-image.tar" KUBE_PROXY_MODE="$MODE" CNI="$CNI"
  i=0
  for N in $COUNTS; do
    i=$((i + 1))
    tag=$MODE-$i-$N
    step "$MODE: run $i, --services $N (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    locked "$BIN" k8s run --image "$REF" --image-pull-policy Never --scenarios pod-cross-node,service --services "$N" \
      --test tcp_crr,tcp_lat --msg-size 1 --duration "$DURATION" --warmup 300ms --repeats "$REPEATS" "${EXTRA[@]}" \
      --json >"$OUT/run-$tag.json" 2>"$OUT/run-$tag.log" || { tail -3 "$OUT/run-$tag.log"; fail "$MODE N=$N"; }
    grep -E "filler services: [0-9]+ Services|ClusterIP .* answers|^settle:" "$OUT/run-$tag.log" || true
    kpm=$(jq -r '.plan.cluster.kube_proxy_mode' "$OUT/run-$tag.json")
    [ "$kpm" = "$MODE" ] || fail "$MODE N=$N: the run detected kube-proxy mode '$kpm'"
    echo "$MODE $N $(run_name "$OUT/run-$tag.json") $i" >>"$OUT/runs.txt"
  done
done
step "report"
"$BIN" report $(awk '{print $3}' "$OUT/runs.txt") --format markdown >"$OUT/report.md"
cat "$OUT/report.md"
for MODE in $MODES; do
  mapfile -t runs < <(awk -v m=$MODE '$1==m {print $3" "$2}' "$OUT/runs.txt")
  pairs=()
  for ((k = 0; k + 1 < ${#runs[@]}; k++)); do pairs+=("$k $((k + 1))"); done
  [ ${#runs[@]} -gt 2 ] && pairs+=("0 $((${#runs[@]} - 1))")
  for pr in "${pairs[@]}"; do
    read -r x y <<<"$pr"
    read -r a na <<<"${runs[$x]}"; read -r b nb <<<"${runs[$y]}"
    echo "### $MODE: run $((x + 1)) N=$na ($a) vs run $((y + 1)) N=$nb ($b)" | tee -a "$OUT/compare.md"
    "$BIN" compare "$a" "$b" --format markdown | tee -a "$OUT/compare.md"
  done
done
step "done; results in $OUT"
