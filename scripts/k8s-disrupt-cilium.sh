#!/usr/bin/env bash
# Disruption timelines on real Cilium (k8slab's addons/cilium, v1.20.2):
# udp-rr and tcp-crr through a ClusterIP Service behind N filler Services
# while NetworkPolicies, Services and endpoints change through the API, and
# while the server node's cilium-agent is restarted (docs/disruption.md,
# "On Kubernetes"). Cilium enforces NetworkPolicy, so policy-churn — the
# echo pod isolated by a policy that lets the probes in, then freed — is
# a change of its datapath here, not a no-op as on Flannel.
#
#   addons/cilium/teardown.sh; MODE/KPR setup.sh; import the image
#   cnibench k8s disrupt --services N --events blackhole --repeats 10 (200 ms each, on the client's node)
#   -> every blackhole's gap is 200 ms within one bucket, in both probes
#   cnibench k8s disrupt --services N --events policy-churn,endpoint-change,service-churn --repeats R
#   cnibench k8s disrupt --services N --events agent-restart --restart-cmd '<kill; setup.sh; status OK>'
#   -> each run restored its changes, left no object, and names Cilium
#
# k8slab's cilium-agents are host processes (one per node network
# namespace), not pods: "restart" is SIGTERM to the server node's agent
# (its pid file), setup.sh starting it again once it is gone (it starts
# only missing agents), and the event ends when `cilium-dbg status --brief`
# on that node's socket answers OK. Cilium keeps its BPF programs and maps
# pinned across the restart, so the datapath is meant to keep forwarding.
#
# Needs root. Tears Cilium and the cluster down (purged) on every path out.
# Environment:
#   MODE=vxlan-kpr (or native-kp: kube-proxy in iptables mode beside Cilium)
#   N=1000 REPEATS=5 RESTART=1 (0: no restart run) BLACKHOLE=1 (0: no blackhole run)
#   CHURN=1 (0: no churn run)
#   OUT=DIR   keeps the results (JSON, HTML, text) and logs
#   CNB_LOCK=F  hold `flock -x F` around each run (a shared machine's CPU lock)
. "$(dirname "$0")/lib.sh"
cnb_script k8s-disrupt-cilium
MODE=${MODE:-vxlan-kpr}
N=${N:-1000}
REPEATS=${REPEATS:-5}
RESTART=${RESTART:-1}
BLACKHOLE=${BLACKHOLE:-1}
CHURN=${CHURN:-1}

need_root "k8slab and Cilium's agents"
find_k8slab
need_bin
need_tool jq
ADDON=$(dirname "$K8SLAB")/addons/cilium
[ -x "$ADDON/setup.sh" ] || fail "no Cilium addon at $ADDON"
DBG=${K8SLAB_CACHE:-/var/cache/k8slab}/cilium/bin/cilium-dbg
STATE=/var/lib/k8slab-cilium
case $MODE in
  vxlan-kpr) ENVS=(MODE=vxlan KPR=true KUBE_PROXY_MODE=none) ;;
  native-kp) ENVS=(MODE=native KPR=false KUBE_PROXY_MODE=iptables) ;;
  *) fail "MODE $MODE: want vxlan-kpr or native-kp" ;;
esac
out_dir k8s-disrupt-cilium
export CNIBENCH_DB=${CNIBENCH_DB:-$OUT/results.db} # the runs, stored: not the user's own database
trap '"$ADDON/teardown.sh" >"$OUT/teardown.log" 2>&1 || true' EXIT

k8slab_logged "$OUT/build.log" build
cp "$BIN" "$OUT/cnibench"; BIN=$OUT/cnibench
build_image "$OUT/cnibench-image.tar"

step "$MODE: teardown, then ${ENVS[*]} addons/cilium/setup.sh"
"$ADDON/teardown.sh" >"$OUT/teardown-before.log" 2>&1 || { tail -5 "$OUT/teardown-before.log"; fail "teardown before setup"; }
env "${ENVS[@]}" "$ADDON/setup.sh" >"$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; fail "setup.sh"; }
eval "$("$K8SLAB" env)"
"$K8SLAB" import "$OUT/cnibench-image.tar" >"$OUT/import.txt"
[ "$(grep -c "imported $REF" "$OUT/import.txt")" = 2 ] || fail "image $REF not imported into both nodes"

# run_checked TAG ARGS...: one k8s disrupt run; its result must be restored
# and name Cilium.
run_checked() {
  local tag=$1
  shift
  locked "$BIN" k8s disrupt "$@" -o "$OUT/$tag.json" --html "$OUT/$tag.html" >"$OUT/$tag.txt" 2>"$OUT/$tag.log" ||
    { tail -3 "$OUT/$tag.log"; fail "$tag"; }
  jq -e '.arms[-1] | .restored and (.name | startswith("cilium")) and (.timelines | length) == 2' "$OUT/$tag.json" >/dev/null ||
    fail "$tag: arm not restored or not Cilium's: $(jq -c '.arms[-1] | {name, restored, knobs}' "$OUT/$tag.json")"
  cat "$OUT/$tag.txt"
}

common=(--image "$REF" --image-pull-policy Never --services "$N" --target service)
if [ "$BLACKHOLE" = 1 ]; then
  step "blackhole × 10, 200 ms each (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  run_checked blackhole "${common[@]}" --events blackhole --blackhole 200ms --repeats 10 --spacing 2s
  check_blackhole "$OUT/blackhole.json" 200
fi
if [ "$CHURN" = 1 ]; then
  step "policy-churn, endpoint-change, service-churn × $REPEATS (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  run_checked churn "${common[@]}" --events policy-churn,endpoint-change,service-churn --repeats "$REPEATS"
fi

if [ "$RESTART" = 1 ]; then
  restart="S=$STATE/\$CNB_NODE && pid=\$(cat \$S/agent.pid) && [ \"\$(cat /proc/\$pid/comm)\" = cilium-agent ] && kill \$pid &&
    while kill -0 \$pid 2>/dev/null; do sleep 0.01; done &&
    env ${ENVS[*]} $ADDON/setup.sh >>$OUT/restart-setup.log 2>&1 &&
    until CILIUM_SOCK=\$S/run/cilium.sock $DBG status --brief 2>/dev/null | grep -qx OK; do sleep 0.05; done"
  step "agent-restart of cilium-agent (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  run_checked restart "${common[@]}" --events agent-restart --repeats 2 --spacing 30s --restart-cmd "$restart"
fi
step "done; results in $OUT"
