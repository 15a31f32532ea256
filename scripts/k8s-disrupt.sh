#!/usr/bin/env bash
# Disruption timelines on a real cluster (k8slab, 2 nodes): udp-rr and
# tcp-crr through a ClusterIP Service behind N filler Services while
# endpoints and Services change through the API, and while kube-proxy of
# the server's node is restarted, with kube-proxy in each mode
# (docs/disruption.md, "On Kubernetes").
#
#   for MODE in MODES:
#     k8slab down; KUBE_PROXY_MODE=MODE CNI=$CNI k8slab up; import the image
#     cnibench k8s disrupt --services N --events endpoint-change,service-churn --repeats R
#     cnibench k8s disrupt --services N --events agent-restart --restart-cmd '<kill; k8slab up; healthz>'
#   -> each run's detected kube-proxy mode is checked, its changes undone
#      (restored) and no object of it left; the second mode's runs are
#      compared with the first's (--against): the verdicts per event kind
#
# k8slab's kube-proxy is a host process, not a pod: "restart" is SIGTERM to
# node 2's kube-proxy, `k8slab up` starting it again once it is gone (same
# command line and config), and the event ends when its /healthz in the
# node's namespace reports a lastUpdated: its first full sync done (healthz
# answers 200 from the start, "healthy while starting up", with a zero
# lastUpdated until then).
#
# Needs root. Leaves the cluster down (not purged). Environment:
#   MODES="iptables nftables" N=1000 REPEATS=5 CNI=flannel-vxlan
#   OUT=DIR       keeps the results (JSON, HTML, text) and logs (default: a temp dir, printed)
#   CNB_LOCK=F    hold `flock -x F` around each run (a shared machine's CPU lock)
. "$(dirname "$0")/lib.sh"
cnb_script k8s-disrupt
MODES=${MODES:-iptables nftables}
N=${N:-1000}
REPEATS=${REPEATS:-5}
CNI=${CNI:-flannel-vxlan}

need_root k8slab
find_k8slab
need_bin
need_tool jq curl
out_dir k8s-disrupt
trap '"$K8SLAB" down >"$OUT/down.log" 2>&1 || true' EXIT

build=(build)
case $CNI in flannel-*) build+=(flannel) ;; esac
k8slab_logged "$OUT/build.log" "${build[@]}"
cp "$BIN" "$OUT/cnibench"; BIN=$OUT/cnibench
build_image "$OUT/cnibench-image.tar"

# check_run TAG MODE: the run wrote its result, restored what it changed and
# detected the mode it ran under.
check_run() {
  local json=$OUT/$1.json
  [ -s "$json" ] || fail "$1: no result"
  jq -e --arg m "$2" '.arms[-1] | .restored and .knobs.proxy == $m and (.timelines | length) == 2' "$json" >/dev/null ||
    fail "$1: last arm not restored, or not in kube-proxy mode $2: $(jq -c '.arms[-1] | {restored, knobs}' "$json")"
}

prev_churn="" prev_restart=""
for MODE in $MODES; do
  step "$MODE: k8slab down; KUBE_PROXY_MODE=$MODE CNI=$CNI k8slab up"
  cluster_up "$OUT" "$MODE" "$OUT/cnibench-image.tar" KUBE_PROXY_MODE="$MODE" CNI="$CNI"
  common=(--image "$REF" --image-pull-policy Never --services "$N" --target service)

  step "$MODE: endpoint-change, service-churn × $REPEATS (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  locked "$BIN" k8s disrupt "${common[@]}" --events endpoint-change,service-churn --repeats "$REPEATS" \
    -o "$OUT/churn-$MODE.json" --html "$OUT/churn-$MODE.html" ${prev_churn:+--against "$prev_churn"} \
    >"$OUT/churn-$MODE.txt" 2>"$OUT/churn-$MODE.log" || { tail -3 "$OUT/churn-$MODE.log"; fail "$MODE churn"; }
  check_run "churn-$MODE" "$MODE"
  cat "$OUT/churn-$MODE.txt"
  prev_churn=$OUT/churn-$MODE.json

  restart="pid=\$(cat /run/k8slab/\$CNB_NODE-kube-proxy.pid) && kill \$pid && while kill -0 \$pid 2>/dev/null; do sleep 0.01; done &&
    KUBE_PROXY_MODE=$MODE CNI=$CNI NODES=2 $K8SLAB up >>$OUT/restart-up-$MODE.log 2>&1 &&
    until nsenter --net=/run/netns/\$CNB_NODE curl -sf http://127.0.0.1:10256/healthz | grep -q '\"lastUpdated\": \"2'; do sleep 0.02; done"
  step "$MODE: agent-restart of kube-proxy (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  locked "$BIN" k8s disrupt "${common[@]}" --events agent-restart --repeats 1 --spacing 20s \
    --restart-cmd "$restart" -o "$OUT/restart-$MODE.json" --html "$OUT/restart-$MODE.html" ${prev_restart:+--against "$prev_restart"} \
    >"$OUT/restart-$MODE.txt" 2>"$OUT/restart-$MODE.log" || { tail -3 "$OUT/restart-$MODE.log"; fail "$MODE restart"; }
  check_run "restart-$MODE" "$MODE"
  cat "$OUT/restart-$MODE.txt"
  prev_restart=$OUT/restart-$MODE.json
done
step "done; results in $OUT"
