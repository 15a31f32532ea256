#!/usr/bin/env bash
# Disruption timelines on a real cluster (k8slab, 2 nodes): udp-rr and
# tcp-crr through a ClusterIP Service behind N filler Services while
# endpoints and Services change through the API, and while kube-proxy of
# the server's node is restarted, with kube-proxy in each mode
# (docs/disruption.md, "On Kubernetes").
#
#   for MODE in MODES:
#     k8slab down; KUBE_PROXY_MODE=MODE CNI=$CNI k8slab up; import the image
#     cnibench k8s disrupt --services N --events blackhole --repeats 10 (first mode; 200 ms each)
#     cnibench k8s disrupt --services N --events endpoint-change,service-churn --repeats R
#     cnibench k8s disrupt --services N --events agent-restart --restart-cmd '<kill; k8slab up; healthz>'
#   -> every blackhole's gap is 200 ms within one bucket, in both probes
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
#   MODES="iptables nftables" N=1000 REPEATS=5 CNI=flannel-vxlan RESTART=1 (0: no restart runs)
#   BLACKHOLE=1 (0: no blackhole run) CHURN=1 (0: no churn runs)
#   AGENTS="kube-proxy" the agents restarted, each in a run of its own:
#     kube-proxy, flanneld (SIGTERM to node 2's flanneld, `k8slab up` starting
#     it again, the event ending when k8slab up has seen its subnet file)
#   OUT=DIR       keeps the results (JSON, HTML, text) and logs (default: a temp dir, printed)
#   CNB_LOCK=F    hold `flock -x F` around each run (a shared machine's CPU lock)
. "$(dirname "$0")/lib.sh"
cnb_script k8s-disrupt
MODES=${MODES:-iptables nftables}
N=${N:-1000}
REPEATS=${REPEATS:-5}
CNI=${CNI:-flannel-vxlan}
RESTART=${RESTART:-1}
BLACKHOLE=${BLACKHOLE:-1}
CHURN=${CHURN:-1}
AGENTS=${AGENTS:-kube-proxy}

need_root k8slab
find_k8slab
need_bin
need_tool jq curl
out_dir k8s-disrupt
export CNIBENCH_DB=${CNIBENCH_DB:-$OUT/results.db} # the runs, stored: not the user's own database
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

# ct_drops: the conntrack table's drops ("table full") summed over both
# nodes' namespaces and every CPU. The limit is the host's; another tenant
# lowering it makes the probes' new flows drop, which no event did.
ct_drops() {
  local n v s=0
  for n in k8slab-n1 k8slab-n2; do
    for v in $(ip netns exec "$n" cat /proc/net/stat/nf_conntrack |
      awk '/entries/ {for (i = 1; i <= NF; i++) if ($i == "drop") c = i; next} c {print $c}'); do
      s=$((s + 16#$v))
    done
  done
  echo "$s"
}
# run_checked TAG MODE ARGS...: one k8s disrupt run, its result checked and
# printed with the conntrack drops it saw.
run_checked() {
  local tag=$1 mode=$2 d0 d1
  shift 2
  d0=$(ct_drops)
  locked "$BIN" k8s disrupt "$@" -o "$OUT/$tag.json" --html "$OUT/$tag.html" >"$OUT/$tag.txt" 2>"$OUT/$tag.log" ||
    { tail -3 "$OUT/$tag.log"; fail "$tag"; }
  d1=$(ct_drops)
  check_run "$tag" "$mode"
  cat "$OUT/$tag.txt"
  echo "$tag: conntrack drops on the nodes while it ran: $((d1 - d0)); nf_conntrack_max: $(jq -c '[.arms[-1].host_conntrack_max, .arms[-1].knobs.host_conntrack_max_min]' "$OUT/$tag.json")"
}

prev_churn="" prev_kube_proxy="" prev_flanneld=""
for MODE in $MODES; do
  step "$MODE: k8slab down; KUBE_PROXY_MODE=$MODE CNI=$CNI k8slab up"
  cluster_up "$OUT" "$MODE" "$OUT/cnibench-image.tar" KUBE_PROXY_MODE="$MODE" CNI="$CNI"
  common=(--image "$REF" --image-pull-policy Never --services "$N" --target service)

  if [ "$BLACKHOLE" = 1 ] && [ -z "$prev_churn" ]; then
    step "$MODE: blackhole × 10, 200 ms each (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    run_checked "blackhole-$MODE" "$MODE" "${common[@]}" --events blackhole --blackhole 200ms --repeats 10 --spacing 2s
    check_blackhole "$OUT/blackhole-$MODE.json" 200
  fi
  if [ "$CHURN" = 1 ]; then
    step "$MODE: endpoint-change, service-churn × $REPEATS (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    run_checked "churn-$MODE" "$MODE" "${common[@]}" --events endpoint-change,service-churn --repeats "$REPEATS" \
      ${prev_churn:+--against "$prev_churn"}
    prev_churn=$OUT/churn-$MODE.json
  fi
  [ "$RESTART" = 1 ] || continue

  for agent in $AGENTS; do
    up="KUBE_PROXY_MODE=$MODE CNI=$CNI NODES=2 $K8SLAB up >>$OUT/restart-up-$agent-$MODE.log 2>&1"
    stop="pid=\$(cat /run/k8slab/\$CNB_NODE-$agent.pid) && kill \$pid && while kill -0 \$pid 2>/dev/null; do sleep 0.01; done"
    case $agent in
      kube-proxy) restart="$stop && $up &&
        until nsenter --net=/run/netns/\$CNB_NODE curl -sf http://127.0.0.1:10256/healthz | grep -q '\"lastUpdated\": \"2'; do sleep 0.02; done" ;;
      flanneld) [[ $CNI == flannel-* ]] || fail "AGENTS=flanneld needs CNI=flannel-*"
        restart="$stop && $up" ;;
      *) fail "AGENTS: $agent is not kube-proxy or flanneld" ;;
    esac
    tag=restart-$agent-$MODE prev=prev_$agent
    prev=${prev//-/_}
    step "$MODE: agent-restart of $agent (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    run_checked "$tag" "$MODE" "${common[@]}" --events agent-restart --repeats 1 --spacing 20s \
      --restart-cmd "$restart" ${!prev:+--against "${!prev}"}
    printf -v "$prev" %s "$OUT/$tag.json"
  done
done
step "done; results in $OUT"
