#!/usr/bin/env bash
# Real-CNI tier: `cnibench k8s run` against datapaths nobody here wrote.
#
#   k8slab build flannel -> for CNI in bridge, flannel-host-gw, flannel-vxlan:
#     k8slab down; CNI=... k8slab up; import the image; k8s run (all four
#     scenarios, tcp_lat and tcp_bw at 1 B and 4 KiB, sender/receiver CPU)
#     -> the CNI and kube-proxy mode the run detected match what was started
#     -> flannel-vxlan: the pods' traffic really crossed flannel.1
#     -> --agent-cpu: every window has its datapath agents' CPU (kube-proxy,
#        and flanneld on the Flannel runs)
#   -> the three runs, one experiment (same flags) in one database, rendered
#      as one comparison (seed 004's tunnel-mode table: modes as rows)
#
# Needs root; the cluster is purged on exit. K8SLAB as in e2e-k8s.sh.
# E2E_CNI_OUT=DIR keeps the results database and the comparison there.
# REPEATS (default 3) and DURATION (default 1s) size the runs.
. "$(dirname "$0")/lib.sh"
cnb_script e2e-cni
REPEATS=${REPEATS:-3}
DURATION=${DURATION:-1s}

need_root "k8slab runs kubelets and containerd"
find_k8slab
need_bin
need_tool jq sqlite3

TMP=$(mktemp -d /tmp/cnb-e2e-cni.XXXXXX)
OUT=${E2E_CNI_OUT:-$TMP}
mkdir -p "$OUT"
export CNIBENCH_DB=$OUT/results.db
purge_on_exit "$TMP"

step "k8slab install + build + build flannel (no-ops when the cache is warm)"
k8slab_prepare "$TMP" flannel
grep "flanneld" "$TMP/build-flannel.log" | tail -1

build_image "$TMP/cnibench-image.tar"

rx() { # flannel.1 rx packets on node $1 (0 when absent)
  ip -n "$1" -s -j link show flannel.1 2>/dev/null | jq -r '.[0].stats64.rx.packets // 0' 2>/dev/null || echo 0
}

RUNS=()
# One retry of the VXLAN cluster when flannel.1 saw no traffic: that happened
# once in six runs on this machine (2026-11-26; the run itself passed, in half its usual
# time), with no log left to say why. The first attempt's evidence is printed
# before the retry, and a second failure fails the tier.
tries=(bridge flannel-host-gw flannel-vxlan)
retried=
while [ ${#tries[@]} -gt 0 ]; do
  CNI=${tries[0]}; tries=("${tries[@]:1}")
  step "$CNI: k8slab down; CNI=$CNI k8slab up"
  cluster_up "$TMP" "$CNI" "$TMP/cnibench-image.tar" CNI="$CNI"

  before=$(rx k8slab-n1)
  step "$CNI: k8s run, all scenarios, $REPEATS repeats"
  "$BIN" k8s run --image-pull-policy Never --scenarios default --test tcp_lat,tcp_bw --msg-size 1,4K \
    --duration "$DURATION" --warmup 300ms --repeats "$REPEATS" --agent-cpu --json >"$OUT/run-$CNI.json" 2>"$TMP/run-$CNI.log" \
    || { tail -5 "$TMP/run-$CNI.log"; fail "$CNI: k8s run exited non-zero"; }
  after=$(rx k8slab-n1)
  grep -E "^probed|ClusterIP" "$TMP/run-$CNI.log" || true
  no_pod_failed "$OUT/run-$CNI.json" "$CNI"

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
  # The agents' CPU: kube-proxy on every run, flanneld where Flannel runs.
  agents=kube-proxy
  case $CNI in flannel-*) agents="kube-proxy flanneld" ;; esac
  for a in $agents; do
    jq -e --arg a "$a" '[.samples[].results[] | .cpu.datapath.seconds != null and ([.cpu.datapath.agents[].process] | index($a) != null)] | all' \
      "$OUT/run-$CNI.json" >/dev/null || fail "$CNI: $a's CPU missing from a window: $(jq -c '[.samples[].results[] | .missing["cpu.datapath"] // .missing["cpu.datapath.seconds"] // empty][0]' "$OUT/run-$CNI.json")"
  done
  echo "e2e-cni: $CNI: agents' CPU, median over the windows (% of one CPU): $(jq -r '[.samples[].results[].cpu.datapath.agents[]] | group_by(.process)
    | map(.[0].process + " " + ((map(.pct) | map(select(. != null)) | sort) as $v
      | if ($v | length) == 0 then "missing" else ($v[($v | length) / 2 | floor] * 100 | round / 100 | tostring) + " %" end))
    | join(", ")' "$OUT/run-$CNI.json")"
  if [ "$CNI" = flannel-vxlan ] && [ $((after - before)) -le 1000 ]; then
    msg="flannel-vxlan: flannel.1 on k8slab-n1 received $((after - before)) packets during the run"
    [ -z "$retried" ] || fail "$msg (second attempt)"
    echo "e2e-cni: WARNING: $msg; its links, routes and run log follow, then one retry"
    ip -n k8slab-n1 -d link show 2>&1 | grep -A2 -E 'flannel|cni0' || true
    ip -n k8slab-n1 route 2>&1 || true
    tail -20 "$TMP/run-$CNI.log"
    retried=1; tries=(flannel-vxlan)
    continue
  fi
  RUNS+=("$(run_name "$OUT/run-$CNI.json")")
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
