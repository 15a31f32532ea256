#!/usr/bin/env bash
# Control plane to datapath latencies on a real cluster (k8slab): a new
# Service until it answers from every node and a new pod until every node
# answers it, over TRIALS trials, at N = 0, 1,000, 10,000 other Services, with
# kube-proxy in iptables and in nftables mode (docs/kubernetes.md, "Control
# plane to datapath").
#
#   for MODE in MODES:
#     k8slab down; KUBE_PROXY_MODE=MODE CNI=$CNI k8slab up; import the image
#     for N in COUNTS: cnibench k8s latency --kinds $KINDS --trials $TRIALS --services N
#   -> every run's detected kube-proxy mode is checked, and that it has a
#      latency per trial (a failed trial fails the script, with its reason)
#   -> `cnibench compare` of the first mode's run against the second's at
#      each N: the difference between the modes, with a verdict
#   -> per run, the Service trials split by what kube-proxy did between the
#      create and the datapath (a full sync or partial ones only), from its
#      metrics; COUNTS=10000 measures only N = 10,000
#
# Needs root. Leaves the cluster down (not purged). Environment:
#   MODES="iptables nftables" COUNTS="0 1000 10000" TRIALS=20 KINDS=service,pod CNI=flannel-vxlan
#   OUT=DIR       keeps results.db, the runs' JSON and logs (default: a temp dir, printed)
#   CNB_LOCK=F    hold `flock -x F` around each run (a shared machine's CPU lock)
. "$(dirname "$0")/lib.sh"
cnb_script k8s-latency
MODES=${MODES:-iptables nftables}
COUNTS=${COUNTS:-0 1000 10000}
TRIALS=${TRIALS:-20}
KINDS=${KINDS:-service,pod}
CNI=${CNI:-flannel-vxlan}

need_root k8slab
find_k8slab
need_bin
need_tool jq
out_dir k8s-latency
export CNIBENCH_DB=$OUT/results.db
trap '"$K8SLAB" down >"$OUT/down.log" 2>&1 || true' EXIT

build=(build)
case $CNI in flannel-*) build+=(flannel) ;; esac
k8slab_logged "$OUT/build.log" "${build[@]}"
cp "$BIN" "$OUT/cnibench"; BIN=$OUT/cnibench
build_image "$OUT/cnibench-image.tar"
for MODE in $MODES; do
  step "$MODE: k8slab down; KUBE_PROXY_MODE=$MODE CNI=$CNI k8slab up"
  cluster_up "$OUT" "$MODE" "$OUT/cnibench-image.tar" KUBE_PROXY_MODE="$MODE" CNI="$CNI"
  for N in $COUNTS; do
    tag=$MODE-$N
    step "$MODE: --services $N (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    locked "$BIN" k8s latency --image "$REF" --image-pull-policy Never --kinds "$KINDS" --trials "$TRIALS" \
      --services "$N" --json >"$OUT/latency-$tag.json" 2>"$OUT/latency-$tag.log" ||
      { tail -3 "$OUT/latency-$tag.log"; fail "$MODE N=$N"; }
    kpm=$(jq -r '.cluster.kube_proxy_mode' "$OUT/latency-$tag.json")
    [ "$kpm" = "$MODE" ] || fail "$MODE N=$N: the run detected kube-proxy mode '$kpm'"
    jq -r '.summary[] | "\(.test): \(.ok)/\(.trials) trials, median \(.median_ms) ms [\(.median_ci_ms.low)–\(.median_ci_ms.high)], p90 \(.p90_ms) ms, max \(.max_ms) ms"' \
      "$OUT/latency-$tag.json"
    # The Service trials by what kube-proxy did on the slowest node between
    # the create and its datapath (its own metrics), and its full syncs.
    jq -r '(.by_kube_proxy_sync // [])[] | "  \(.test): \(.ok) trials, median \(.median_ms) ms [\(.median_ci_ms.low)–\(.median_ci_ms.high)]",
      ((.kube_proxy // [])[] | "  kube-proxy on \(.node): \(.full_syncs_seen) full syncs seen, median interval \(.median_interval_s) s, mean full \(.mean_full_sync_ms) ms, mean partial \(.mean_partial_sync_ms) ms")' \
      "$OUT/latency-$tag.json"
    echo "$MODE $N $(jq -r .run "$OUT/latency-$tag.json")" >>"$OUT/runs.txt"
  done
done
set -- $MODES
if [ $# -ge 2 ]; then
  for N in $COUNTS; do
    a=$(awk -v m="$1" -v n="$N" '$1==m && $2==n {print $3; exit}' "$OUT/runs.txt")
    b=$(awk -v m="$2" -v n="$N" '$1==m && $2==n {print $3; exit}' "$OUT/runs.txt")
    echo "### N=$N: $1 ($a) vs $2 ($b)" | tee -a "$OUT/compare.md"
    "$BIN" compare "$a" "$b" --format markdown | tee -a "$OUT/compare.md"
    # The same, per group of what kube-proxy did on the slowest node.
    "$BIN" k8s latency --summarize "$OUT/latency-$1-$N.json" --summarize "$OUT/latency-$2-$N.json" | tee -a "$OUT/compare.md"
  done
fi
step "done; results in $OUT"
