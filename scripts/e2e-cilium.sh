#!/usr/bin/env bash
# Real Cilium tier: `cnibench k8s run` on Cilium v1.20.2 (k8slab's
# addons/cilium) in each mode seed 004's tables need, with checks that
# Cilium's datapath — not kube-proxy, not the kernel alone — carried the
# traffic:
#
#   k8slab install + build; image build (plain and --with-tools)
#   for each mode (MODES, default all five below):
#     addons/cilium/setup.sh in that mode; k8slab test (every check passes)
#     k8s run: the four default scenarios, tcp_lat, tcp_crr, tcp_bw,
#       --profile --agent-cpu --inspect-datapath --keep, while Cilium's
#       conntrack map is dumped every second on both nodes
#     -> the run names Cilium 1.20.2 and the mode it was started in
#     -> Cilium's programs on the server pods' devices (tcx ingress
#        cil_from_container), found by `cnibench probe attached`
#     -> Cilium's conntrack map held the test's flows; through the Service:
#        SVC entries for the ClusterIP where Cilium's tc programs
#        translate it, none where its socket LB does (the replacement)
#     -> cilium_vxlan's counters moved in VXLAN mode; no such device in
#        native routing
#     -> replacement without kube-proxy: the Service answered and no
#        kube-proxy rule exists (KUBE-SERVICES, table ip kube-proxy);
#        kube-proxy's modes: its rules are there
#     -> the stage table names Cilium's programs; cilium-agent's CPU in
#        every window; explain host-network vs pod-cross-node
#     k8s clean; a cross-check: builtin, qperf and iperf3 in pods, one run
#     addons/cilium/teardown.sh
#   -> one report of every mode's run, side by side (seed 004's rows)
#
# Needs root; the cluster is torn down and purged on every path out.
# MODES="vxlan-kpr native-kpr native-bpfhost native-kp native-kp-nft"
# REPEATS (2) and DURATION (1s) size the runs; E2E_CILIUM_OUT=DIR keeps the
# results database, the runs' JSON, logs and the comparison.
. "$(dirname "$0")/lib.sh"
cnb_script e2e-cilium
MODES=${MODES:-"vxlan-kpr native-kpr native-bpfhost native-kp native-kp-nft"}
REPEATS=${REPEATS:-2}
DURATION=${DURATION:-1s}
CILIUM_VERSION=1.20.2

need_root "k8slab runs kubelets and containerd; Cilium's agents need root"
find_k8slab
need_bin
need_tool jq sqlite3 nsenter iptables-save nft
ADDON=$(dirname "$K8SLAB")/addons/cilium
[ -x "$ADDON/setup.sh" ] || fail "no Cilium addon at $ADDON"
CACHE=${K8SLAB_CACHE:-/var/cache/k8slab}
DBG=$CACHE/cilium/bin/cilium-dbg
STATE=/var/lib/k8slab-cilium

TMP=$(mktemp -d /tmp/cnb-e2e-cilium.XXXXXX)
OUT=${E2E_CILIUM_OUT:-$TMP}
mkdir -p "$OUT"
export CNIBENCH_DB=$OUT/results.db

SAMPLERS=()
teardown() {
  local rc=$?
  for p in "${SAMPLERS[@]}"; do kill "$p" 2>/dev/null || true; done
  step "tearing down (addons/cilium/teardown.sh: agents, operator, k8slab down --purge)"
  "$ADDON/teardown.sh" >"$TMP/teardown-final.log" 2>&1 || { echo "$CNB_SCRIPT: teardown failed:"; tail -5 "$TMP/teardown-final.log"; }
  [ "$OUT" = "$TMP" ] || cp "$TMP"/*.log "$OUT"/ 2>/dev/null || true
  rm -rf "$TMP"
  exit $rc
}
trap teardown EXIT

# mode_env MODE: setup.sh's knobs for a mode (addons/cilium/README.md).
mode_env() {
  case $1 in
    vxlan-kpr) echo "MODE=vxlan KPR=true KUBE_PROXY_MODE=none" ;;
    native-kpr) echo "MODE=native KPR=true KUBE_PROXY_MODE=none" ;;
    native-bpfhost) echo "MODE=native KPR=true KUBE_PROXY_MODE=none EXTRA=--enable-bpf-masquerade=true" ;;
    native-kp) echo "MODE=native KPR=false KUBE_PROXY_MODE=iptables" ;;
    native-kp-nft) echo "MODE=native KPR=false KUBE_PROXY_MODE=nftables" ;;
    *) fail "unknown mode $1 (MODES takes vxlan-kpr native-kpr native-bpfhost native-kp native-kp-nft)" ;;
  esac
}

agent_pid() { cat "$STATE/$1/agent.pid"; }
# dbg NODE ARGS...: cilium-dbg inside that node's agent (its mount namespace
# holds the node's bpffs at /sys/fs/bpf and its socket at /run/cilium).
dbg() { local n=$1; shift; nsenter -t "$(agent_pid "$n")" -m -n -- "$DBG" "$@"; }
vxlan_packets() { # rx+tx packets of cilium_vxlan on node $1, "absent" without the device
  ip -n "$1" -s -j link show cilium_vxlan 2>/dev/null | jq -r '.[0].stats64 | .rx.packets + .tx.packets' 2>/dev/null || echo absent
}

step "k8slab install + build (no-ops when the cache is warm)"
k8slab_prepare "$TMP"
step "cnibench image build (plain and --with-tools)"
build_image "$TMP/cnibench-image.tar"
PLAIN=$REF
build_image "$TMP/tools-image.tar" --with-tools
TOOLS=$REF

RUNS=()
for M in $MODES; do
  read -r -a ENVS <<<"$(mode_env "$M")"
  step "$M: teardown, then ${ENVS[*]} addons/cilium/setup.sh (builds Cilium when its cache is cold)"
  "$ADDON/teardown.sh" >"$TMP/teardown-$M.log" 2>&1 || { tail -5 "$TMP/teardown-$M.log"; fail "$M: teardown before setup"; }
  env "${ENVS[@]}" "$ADDON/setup.sh" >"$TMP/setup-$M.log" 2>&1 || { tail -20 "$TMP/setup-$M.log"; fail "$M: setup.sh"; }
  grep -E "built cilium|all nodes Ready" "$TMP/setup-$M.log" || true
  eval "$("$K8SLAB" env)"

  step "$M: k8slab test"
  "$K8SLAB" test >"$TMP/test-$M.log" 2>&1 || { tail -15 "$TMP/test-$M.log"; fail "$M: k8slab test"; }
  tail -1 "$TMP/test-$M.log"
  for tar in "$TMP/cnibench-image.tar" "$TMP/tools-image.tar"; do
    "$K8SLAB" import "$tar" >>"$TMP/import-$M.txt" 2>&1 || { tail -5 "$TMP/import-$M.txt"; fail "$M: import $tar"; }
  done

  # Cilium's conntrack entries of the engine's port, every second on both
  # nodes, while the run goes (closed connections leave the map within
  # seconds of their last packet).
  for n in k8slab-n1 k8slab-n2; do
    (while :; do dbg "$n" bpf ct list global 2>/dev/null | grep ':7420 ' || true; sleep 1; done >"$TMP/ct-$M-$n.txt") &
    SAMPLERS+=($!)
  done
  vx_before=$(vxlan_packets k8slab-n1)

  step "$M: k8s run (4 scenarios, tcp_lat tcp_crr tcp_bw 1 KiB, $REPEATS repeats, --profile --agent-cpu --inspect-datapath --keep)"
  "$BIN" k8s run --image-pull-policy Never --image "$PLAIN" --scenarios default --test tcp_lat,tcp_crr,tcp_bw --msg-size 1K \
    --duration "$DURATION" --warmup 300ms --repeats "$REPEATS" --profile --agent-cpu --inspect-datapath --keep --json \
    >"$OUT/run-$M.json" 2>"$TMP/run-$M.log" || { tail -5 "$TMP/run-$M.log"; fail "$M: k8s run exited non-zero"; }
  for p in "${SAMPLERS[@]}"; do kill "$p" 2>/dev/null || true; done
  SAMPLERS=()
  vx_after=$(vxlan_packets k8slab-n1)
  RUN=$(run_name "$OUT/run-$M.json")
  grep -E "^probed|ClusterIP" "$TMP/run-$M.log" || true
  no_pod_failed "$OUT/run-$M.json" "$M"

  # 1. The fingerprint names Cilium, its version and the mode it was started in.
  J=$OUT/run-$M.json
  cni=$(jq -r .plan.cluster.cni "$J"); ver=$(jq -r '.plan.cluster.cni_version // ""' "$J")
  cmode=$(jq -r '.plan.cluster.cni_mode // ""' "$J"); kp=$(jq -r '.plan.cluster.kube_proxy_mode // ""' "$J")
  dp=$(jq -r '.plan.cluster.datapath // ""' "$J")
  [ "$cni" = cilium ] && [ "$ver" = "$CILIUM_VERSION" ] || fail "$M: run detected CNI '$cni' version '$ver', want cilium $CILIUM_VERSION"
  case $M in vxlan-*) want_mode=vxlan ;; *) want_mode=native ;; esac
  [ "$cmode" = "$want_mode" ] || fail "$M: run detected mode '$cmode', want $want_mode"
  case $M in
    *-kpr | native-bpfhost) [ "$kp" = "replaced by Cilium" ] || fail "$M: kube-proxy '$kp', want 'replaced by Cilium'" ;;
    native-kp) [[ $kp == "iptables ("* ]] || fail "$M: kube-proxy '$kp', want iptables (…)" ;;
    native-kp-nft) [[ $kp == "nftables ("* ]] || fail "$M: kube-proxy '$kp', want nftables (…)" ;;
  esac
  case $M in
    native-bpfhost) [[ $dp == *"host routing bpf"*"masquerade bpf"* ]] || fail "$M: datapath '$dp', want host routing bpf, masquerade bpf" ;;
    *) [[ $dp == *"host routing legacy"* ]] || fail "$M: datapath '$dp', want host routing legacy" ;;
  esac
  echo "e2e-cilium: $M: detected: $dp; kube-proxy: $kp"

  # 2. Cilium's programs on the server pods' own devices.
  for s in pod-same-node pod-cross-node; do
    ip=$(jq -r --arg s $s '[.samples[] | select(.scenario==$s) | .target][0]' "$J")
    node=$(jq -r --arg s $s '.plan.placements[] | select(.scenario==$s) | .server_node' "$J")
    dev=$(dbg "$node" endpoint list -o json | jq -r --arg ip "$ip" '.[] | select(.status.networking.addressing[0].ipv4 == $ip) | .status.networking["interface-name"]')
    [ -n "$dev" ] || fail "$M: no Cilium endpoint for $s's server $ip on $node"
    "$BIN" probe attached --netns "$node" --json >"$TMP/attached-$M-$node.json"
    jq -e --arg d "$dev" '[.[] | select(.device == $d and .hook == "tcx" and .direction == "ingress" and .name == "cil_from_container")] | length == 1' \
      "$TMP/attached-$M-$node.json" >/dev/null || fail "$M: $s's server device $dev on $node has no tcx ingress cil_from_container: $(jq -c --arg d "$dev" '[.[] | select(.device == $d)]' "$TMP/attached-$M-$node.json")"
    echo "e2e-cilium: $M: $s server $ip on $node: $dev tcx ingress cil_from_container"
  done
  jq -e '.plan.cluster.probes | map(.bpf | length > 0) | all' "$J" >/dev/null || fail "$M: a probe listed no BPF program (bpf_error: $(jq -c '[.plan.cluster.probes[].bpf_error]' "$J"))"

  # 3. Cilium's conntrack map held the test's flows.
  cross=$(jq -r '[.samples[] | select(.scenario=="pod-cross-node") | .target][0]' "$J")
  svc=$(jq -r '[.samples[] | select(.scenario=="service") | .target][0]' "$J")
  n_cross=$(grep -c -- "-> $cross:7420 " "$TMP/ct-$M-k8slab-n1.txt" || true)
  n_svc=$(grep -c -- "SVC .* -> $svc:7420 " "$TMP/ct-$M-k8slab-n1.txt" || true)
  [ "$n_cross" -gt 0 ] || fail "$M: Cilium's CT map on k8slab-n1 never held a flow to $cross:7420"
  case $M in
    *-kp | *-kp-nft) [ "$n_svc" -gt 0 ] || fail "$M: no SVC entry for ClusterIP $svc: Cilium's tc programs did not translate it" ;;
    *) [ "$n_svc" = 0 ] || fail "$M: $n_svc SVC entries for ClusterIP $svc: socket LB should have translated it at connect()" ;;
  esac
  echo "e2e-cilium: $M: Cilium CT lines on k8slab-n1, summed over the 1-s dumps: $n_cross to the pod-cross-node server $cross:7420, $n_svc SVC for ClusterIP $svc:7420"

  # 4. The tunnel: cilium_vxlan moved in VXLAN mode only.
  case $M in
    vxlan-*) [ "$vx_before" != absent ] && [ $((vx_after - vx_before)) -gt 1000 ] || fail "$M: cilium_vxlan on k8slab-n1: $vx_before -> $vx_after packets" ;;
    *) [ "$vx_after" = absent ] || fail "$M: native routing, yet a cilium_vxlan device ($vx_after packets)" ;;
  esac
  echo "e2e-cilium: $M: cilium_vxlan packets on k8slab-n1: $vx_before -> $vx_after"

  # 5. Who served the Service: no kube-proxy rule with the replacement.
  for n in k8slab-n1 k8slab-n2; do
    rules=$(ip netns exec "$n" iptables-save 2>/dev/null | grep -c -E 'KUBE-SERVICES|KUBE-SVC-' || true)
    nftkp=$(ip netns exec "$n" nft list tables 2>/dev/null | grep -c 'kube-proxy' || true)
    case $M in
      *-kpr | native-bpfhost) [ "$rules" = 0 ] && [ "$nftkp" = 0 ] || fail "$M: $n has kube-proxy rules ($rules iptables lines, $nftkp nft tables) though none runs" ;;
      native-kp) [ "$rules" -gt 0 ] || fail "$M: $n has no KUBE-SERVICES rules" ;;
      native-kp-nft) [ "$nftkp" -gt 0 ] || fail "$M: $n has no nftables kube-proxy table" ;;
    esac
  done
  jq -e '[.samples[] | select(.scenario=="service") | .results | length > 0] | all' "$J" >/dev/null || fail "$M: the Service gave no results"
  echo "e2e-cilium: $M: Service answered; kube-proxy rules: $rules iptables lines, $nftkp nft tables on k8slab-n2"

  # 6. Profile, agents' CPU, report and explain.
  "$BIN" report "$RUN" >"$OUT/report-$M.txt" || fail "$M: report"
  grep -E "ebpf by program: .*(cil_|tail_)" "$OUT/report-$M.txt" >/dev/null || fail "$M: the stage table names no Cilium program"
  grep -m2 "ebpf by program" "$OUT/report-$M.txt"
  jq -e '[.samples[].results[] | [.cpu.datapath.agents[]?.process] | index("cilium-agent") != null] | all' "$J" >/dev/null ||
    fail "$M: cilium-agent's CPU missing from a window"
  "$BIN" explain "$RUN" host-network pod-cross-node --test tcp_crr >"$OUT/explain-$M.txt" || fail "$M: explain"
  head -1 "$OUT/explain-$M.txt"

  step "$M: k8s clean (the run kept its pods for the checks)"
  "$BIN" k8s clean >"$TMP/clean-$M.txt" || fail "$M: k8s clean"
  [ -z "$(kubectl get pods,svc -A -l app.kubernetes.io/managed-by=cnibench --no-headers 2>/dev/null)" ] || fail "$M: k8s clean left objects"

  step "$M: cross-check: builtin, qperf, iperf3 in pods, pod-cross-node"
  "$BIN" k8s run --image-pull-policy Never --image "$TOOLS" --engine builtin,qperf,iperf3 --scenarios pod-cross-node \
    --test tcp_lat,tcp_bw --msg-size 64K --duration "$DURATION" --warmup 300ms --repeats 1 --json \
    >"$OUT/xcheck-$M.json" 2>"$TMP/xcheck-$M.log" || { tail -5 "$TMP/xcheck-$M.log"; fail "$M: cross-check run"; }
  no_pod_failed "$OUT/xcheck-$M.json" "$M cross-check"
  for e in builtin qperf iperf3; do
    jq -e --arg e $e '[.samples[] | select((.engine // "builtin") == $e) | .results | length > 0] | any' "$OUT/xcheck-$M.json" >/dev/null ||
      fail "$M: cross-check: no result from $e"
  done
  "$BIN" report "$(run_name "$OUT/xcheck-$M.json")" --format markdown >"$OUT/xcheck-$M.md"
  RUNS+=("$RUN")
done

step "one report of every mode's run, side by side"
"$BIN" report "${RUNS[@]}" --format markdown >"$OUT/comparison.md"
head -30 "$OUT/comparison.md"
for M in $MODES; do
  grep -q "cilium $CILIUM_VERSION" "$OUT/comparison.md" || fail "comparison does not name cilium $CILIUM_VERSION"
done
step "PASS (${RUNS[*]})"
