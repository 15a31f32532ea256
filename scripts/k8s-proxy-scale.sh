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
#   -> one report of all runs side by side, and `cnibench compare` of
#      N=0 against the largest N in each mode (Mann–Whitney per cell)
#
# Needs root. Leaves the cluster down (not purged). Environment:
#   MODES="iptables nftables" COUNTS="0 1000 10000" REPEATS=4 DURATION=1s CNI=bridge
#   OUT=DIR       keeps results.db, the runs' JSON and the reports (default: a temp dir, printed)
#   CNB_LOCK=F    hold `flock -x F` around each measured run (a shared machine's CPU lock)
. "$(dirname "$0")/lib.sh"
cnb_script k8s-proxy-scale
MODES=${MODES:-iptables nftables}
COUNTS=${COUNTS:-0 1000 10000}
REPEATS=${REPEATS:-4}
DURATION=${DURATION:-1s}
CNI=${CNI:-bridge}

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
  for N in $COUNTS; do
    step "$MODE: --services $N (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    locked "$BIN" k8s run --image "$REF" --image-pull-policy Never --scenarios pod-cross-node,service --services "$N" \
      --test tcp_crr,tcp_lat --msg-size 1 --duration "$DURATION" --warmup 300ms --repeats "$REPEATS" \
      --json >"$OUT/run-$MODE-$N.json" 2>"$OUT/run-$MODE-$N.log" || { tail -3 "$OUT/run-$MODE-$N.log"; fail "$MODE N=$N"; }
    grep -E "filler services: [0-9]+ Services|ClusterIP .* answers" "$OUT/run-$MODE-$N.log" || true
    kpm=$(jq -r '.plan.cluster.kube_proxy_mode' "$OUT/run-$MODE-$N.json")
    [ "$kpm" = "$MODE" ] || fail "$MODE N=$N: the run detected kube-proxy mode '$kpm'"
    echo "$MODE $N $(run_name "$OUT/run-$MODE-$N.json")" >>"$OUT/runs.txt"
  done
done
step "report"
"$BIN" report $(awk '{print $3}' "$OUT/runs.txt") --format markdown >"$OUT/report.md"
cat "$OUT/report.md"
first=$(echo $COUNTS | awk '{print $1}'); last=$(echo $COUNTS | awk '{print $NF}')
for MODE in $MODES; do
  a=$(awk -v m=$MODE -v n=$first '$1==m && $2==n {print $3}' "$OUT/runs.txt")
  b=$(awk -v m=$MODE -v n=$last '$1==m && $2==n {print $3}' "$OUT/runs.txt")
  echo "### $MODE: N=$first ($a) vs N=$last ($b)" | tee -a "$OUT/compare.md"
  "$BIN" compare "$a" "$b" --format markdown | tee -a "$OUT/compare.md"
done
step "done; results in $OUT"
