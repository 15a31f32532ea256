#!/usr/bin/env bash
# The built-in engine against the seeds' own tools, pod to pod on a real
# cluster (k8slab), interleaved in one run per question:
#
#   image build --with-tools -> NODES=2 k8slab up -> import
#   -> latency: --engine builtin,qperf,sockperf, tcp_lat and udp_lat at 64 B
#   -> throughput: --engine builtin,iperf3,qperf, tcp_bw at 64 KiB
#   -> each run's report: every tool as a ratio to the built-in engine
#
# Needs root and qperf, iperf3 and sockperf on the host (their binaries go
# into the image). Leaves the cluster down (not purged). Environment:
#   REPEATS=5 DURATION=5s CNI=bridge
#   OUT=DIR       keeps results.db, the runs' JSON and reports (default: a temp dir)
#   CNB_LOCK=F    hold `flock -x F` around each measured run (a shared machine's CPU lock)
. "$(dirname "$0")/lib.sh"
cnb_script k8s-crosscheck
REPEATS=${REPEATS:-5}
DURATION=${DURATION:-5s}
CNI=${CNI:-bridge}

need_root k8slab
find_k8slab
need_bin
need_tool jq qperf iperf3 sockperf
out_dir crosscheck
export CNIBENCH_DB=$OUT/results.db
trap '"$K8SLAB" down >"$OUT/down.log" 2>&1 || true' EXIT

k8slab_logged "$OUT/build.log" build
cp "$BIN" "$OUT/cnibench"; BIN=$OUT/cnibench
build_image "$OUT/tools.tar" --with-tools
cat "$OUT/tools.tar.txt"
cluster_up "$OUT" "$CNI" "$OUT/tools.tar" CNI="$CNI"

measure() { # NAME ENGINES TESTS SIZE
  step "$1: --engine $2 --test $3 --msg-size $4, $REPEATS repeats of $DURATION (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  locked "$BIN" k8s run --image "$REF" --image-pull-policy Never --scenarios pod-cross-node --engine "$2" \
    --test "$3" --msg-size "$4" --duration "$DURATION" --warmup 1s --repeats "$REPEATS" \
    --json >"$OUT/run-$1.json" 2>"$OUT/run-$1.log" || { tail -3 "$OUT/run-$1.log"; fail "$1"; }
  no_pod_failed "$OUT/run-$1.json" "$1"
  "$BIN" report "$(run_name "$OUT/run-$1.json")" --format markdown | tee "$OUT/report-$1.md"
}
measure latency builtin,qperf,sockperf tcp_lat,udp_lat 64
measure throughput builtin,iperf3,qperf tcp_bw 64K
step "done; results in $OUT"
