#!/usr/bin/env bash
# Real-CNI tier: `cnibench k8s run` against datapaths nobody here wrote.
#
#   k8slab build flannel -> for CNI in bridge, flannel-host-gw, flannel-vxlan:
#     k8slab down; CNI=... k8slab up; import the image; k8s run (all four
#     scenarios, tcp_lat and tcp_bw at 1 B and 4 KiB, sender/receiver CPU)
#     -> the CNI and kube-proxy mode the run detected match what was started
#     -> flannel-vxlan: the pods' traffic really crossed flannel.1
#   -> the three runs, one experiment (same flags) in one database, rendered
#      as one comparison (seed 004's tunnel-mode table: modes as rows)
#
# Needs root; the cluster is purged on exit. K8SLAB as in e2e-k8s.sh.
# E2E_CNI_OUT=DIR keeps the results database and the comparison there.
# REPEATS (default 3) and DURATION (default 1s) size the runs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${CNIBENCH_BIN:-$ROOT/bin/cnibench}
REPEATS=${REPEATS:-3}
DURATION=${DURATION:-1s}
T0=$(date +%s)

fail() { echo "e2e-cni: FAIL: $*" >&2; exit 1; }
step() { echo "e2e-cni: [$(date -u +%T) +$(( $(date +%s) - T0 ))s] $*"; }

[ "$(id -u)" = 0 ] || fail "needs root (k8slab runs kubelets and containerd)"
if [ -z "${K8SLAB:-}" ]; then
  for c in "$ROOT/../shared/k8slab/k8slab" "$ROOT/../../shared/k8slab/k8slab"; do
    if [ -x "$c" ]; then K8SLAB=$(readlink -f "$c"); break; fi
  done
fi
[ -n "${K8SLAB:-}" ] && [ -x "$K8SLAB" ] || fail "k8slab not found: set K8SLAB=/path/to/k8slab/k8slab"
[ -x "$BIN" ] || fail "$BIN missing: run make build"

TMP=$(mktemp -d /tmp/cnb-e2e-cni.XXXXXX)
OUT=${E2E_CNI_OUT:-$TMP}
mkdir -p "$OUT"
export CNIBENCH_DB=$OUT/results.db
cleanup() {
  rc=$?
  step "tearing down (k8slab down --purge)"
  "$K8SLAB" down --purge >"$TMP/down.log" 2>&1 || { echo "e2e-cni: k8slab down failed:"; tail -5 "$TMP/down.log"; }
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT

step "k8slab install + build + build flannel (no-ops when the cache is warm)"
"$K8SLAB" install >"$TMP/install.log" 2>&1 || { tail -20 "$TMP/install.log"; fail "k8slab install"; }
"$K8SLAB" build >"$TMP/build.log" 2>&1 || { tail -20 "$TMP/build.log"; fail "k8slab build"; }
"$K8SLAB" build flannel >"$TMP/build-flannel.log" 2>&1 || { tail -20 "$TMP/build-flannel.log"; fail "k8slab build flannel"; }
grep "flanneld" "$TMP/build-flannel.log" | tail -1

"$BIN" image build -o "$TMP/cnibench-image.tar" >"$TMP/image.txt"
REF=$(sed -n 's/^wrote [^ ]*: \([^ ]*\) .*/\1/p' "$TMP/image.txt")
[ -n "$REF" ] || fail "image build printed no reference"

rx() { # flannel.1 rx packets on node $1 (0 when absent)
  ip -n "$1" -s -j link show flannel.1 2>/dev/null | jq -r '.[0].stats64.rx.packets // 0' 2>/dev/null || echo 0
}

RUNS=()
for CNI in bridge flannel-host-gw flannel-vxlan; do
  step "$CNI: k8slab down; CNI=$CNI k8slab up"
  "$K8SLAB" down >"$TMP/down-$CNI.log" 2>&1 || { tail -5 "$TMP/down-$CNI.log"; fail "k8slab down before $CNI"; }
  CNI=$CNI NODES=2 "$K8SLAB" up >"$TMP/up-$CNI.log" 2>&1 || { tail -20 "$TMP/up-$CNI.log"; fail "CNI=$CNI k8slab up"; }
  eval "$("$K8SLAB" env)"
  "$K8SLAB" import "$TMP/cnibench-image.tar" >"$TMP/import-$CNI.txt"
  [ "$(grep -c "imported $REF" "$TMP/import-$CNI.txt")" = 2 ] || fail "$CNI: image not imported into both nodes"

  before=$(rx k8slab-n1)
  step "$CNI: k8s run, all scenarios, $REPEATS repeats"
  "$BIN" k8s run --image-pull-policy Never --scenarios default --test tcp_lat,tcp_bw --msg-size 1,4K \
    --duration "$DURATION" --warmup 300ms --repeats "$REPEATS" --json >"$OUT/run-$CNI.json" 2>"$TMP/run-$CNI.log" \
    || { tail -5 "$TMP/run-$CNI.log"; fail "$CNI: k8s run exited non-zero"; }
  after=$(rx k8slab-n1)
  grep -E "^probed|ClusterIP" "$TMP/run-$CNI.log" || true
  jq -e '[.samples[] | select(.error)] | length == 0' "$OUT/run-$CNI.json" >/dev/null \
    || fail "$CNI: a client pod failed: $(jq -c '[.samples[] | select(.error) | .error][0]' "$OUT/run-$CNI.json")"

  # The run detected what was started, from the cluster, not from us.
  cni=$(jq -r .plan.cluster.cni "$OUT/run-$CNI.json")
  mode=$(jq -r '.plan.cluster.cni_mode // ""' "$OUT/run-$CNI.json")
  kpm=$(jq -r '.plan.cluster.kube_proxy_mode // ""' "$OUT/run-$CNI.json")
  case $CNI in
    bridge) want_cni=bridge want_mode= ;;
    flannel-host-gw) want_cni=flannel want_mode=host-gw ;;
    flannel-vxlan) want_cni=flannel want_mode=vxlan ;;
  esac
  [ "$cni" = "$want_cni" ] && [ "$mode" = "$want_mode" ] || fail "$CNI: run detected CNI '$cni' mode '$mode', want '$want_cni' '$want_mode'"
  [ "$kpm" = iptables ] || fail "$CNI: run detected kube-proxy mode '$kpm', want iptables"
  echo "e2e-cni: $CNI: detected CNI $cni${mode:+ ($mode)}, kube-proxy $kpm; flannel.1 rx on n1: $before -> $after packets"
  if [ "$CNI" = flannel-vxlan ]; then
    [ $((after - before)) -gt 1000 ] || fail "flannel-vxlan: flannel.1 on k8slab-n1 received $((after - before)) packets during the run"
  fi
  RUNS+=("$(jq -r '"cnb-" + .plan.run_id + "-k8s"' "$OUT/run-$CNI.json")")
done

step "one experiment, three runs"
n=$(sqlite3 "$CNIBENCH_DB" "SELECT COUNT(DISTINCT experiment) FROM runs WHERE name IN ('${RUNS[0]}','${RUNS[1]}','${RUNS[2]}') AND complete=1")
[ "$n" = 1 ] || fail "the three runs are not one complete experiment ($n distinct)"
"$BIN" report "${RUNS[@]}" --format markdown >"$OUT/comparison.md"
cat "$OUT/comparison.md"
for d in "bridge" "flannel host-gw" "flannel vxlan"; do
  grep -q "\[$d, kube-proxy iptables\]" "$OUT/comparison.md" || fail "comparison does not name [$d, kube-proxy iptables]"
done
step "PASS (${RUNS[*]})"
