#!/usr/bin/env bash
# End-to-end tier for `cnibench k8s` against a real Kubernetes v1.31 on this
# machine (k8slab: control plane on the host, nodes as network namespaces).
#
#   image build -> k8slab import -> k8s run (all four scenarios, 2 nodes)
#   -> results in the store -> report -> error and Ctrl-C paths clean up
#   -> k8s audit -> k8s clean leaves nothing
#
# Needs root. The cluster is purged on exit, whatever happens. K8SLAB may
# point at the k8slab script; otherwise ../shared/k8slab next to the repo
# (or next to the worktree folder) is used.
. "$(dirname "$0")/lib.sh"
cnb_script e2e-k8s

ns_phase() { kubectl get ns "$1" -o jsonpath='{.status.phase}' 2>/dev/null || true; }
# left lists the cnibench objects (of run $1 when given) still in the
# cluster, with phase and deletion mark, so that a failure says which.
left() { kubectl get pods,svc -A -l "app.kubernetes.io/managed-by=cnibench${1:+,cnibench.io/run=$1}" --no-headers \
  -o custom-columns=KIND:.kind,NS:.metadata.namespace,NAME:.metadata.name,PHASE:.status.phase,DEL:.metadata.deletionTimestamp; }
# left_nothing JSON WHAT: the run a `--json` document describes returned with
# none of its objects in the cluster (cnibench waits for its pods to go).
# Checked per run, by run id: k8slab is one cluster per machine, and another
# job's runs may share it, so objects of other runs prove nothing about ours.
RUNS=()
left_nothing() {
  local id; id=$(jq -r '.plan.run_id' "$1")
  [ -n "$id" ] && [ "$id" != null ] || fail "$2: no run id in $1"
  RUNS+=("$id")
  [ -z "$(left "$id")" ] || fail "$2 (run $id) left objects: $(left "$id" | tr '\n' ';')"
}

need_root "k8slab runs kubelets and containerd"
find_k8slab
need_bin
need_tool jq sqlite3

TMP=$(mktemp -d /tmp/cnb-e2e-k8s.XXXXXX)
export CNIBENCH_DB=$TMP/results.db
purge_on_exit "$TMP"

step "k8slab install + build (a no-op when the cache is warm)"
k8slab_prepare "$TMP"
step "cnibench image build (twice: reproducible) + NODES=2 k8slab up + import"
build_image "$TMP/cnibench-image.tar"
cat "$TMP/cnibench-image.tar.txt"
build_image "$TMP/again.tar"
cmp -s "$TMP/cnibench-image.tar" "$TMP/again.tar" || fail "image build is not reproducible"
cluster_up "$TMP" bridge "$TMP/cnibench-image.tar"
kubectl get nodes -o wide

"$BIN" k8s info | tee "$TMP/info.txt"
grep -q "Kubernetes v1.31" "$TMP/info.txt" || fail "k8s info: no version"

step "k8s run: the four default scenarios, 2 repeats"
TESTS=tcp_lat,udp_lat,tcp_crr,tcp_bw,udp_bw
"$BIN" k8s run --image-pull-policy Never --scenarios default --test $TESTS --msg-size 64 \
  --duration 1s --warmup 200ms --repeats 2 --json >"$TMP/run.json" 2> >(tee "$TMP/run.log" >&2) \
  || fail "k8s run exited $?"
NAME=$(run_name "$TMP/run.json")
left_nothing "$TMP/run.json" "k8s run"
no_pod_failed "$TMP/run.json" "run"
jq -e '.plan.placements | map(select(.skip)) | length == 0' "$TMP/run.json" >/dev/null || fail "a scenario was skipped on a 2-node cluster"
# Placement as promised: same node together, the others across the two nodes.
jq -e '.plan.placements[] | select(.scenario=="pod-same-node") | .client_node == .server_node' "$TMP/run.json" >/dev/null || fail "pod-same-node not on one node"
for s in pod-cross-node host-network service; do
  jq -e --arg s $s '.plan.placements[] | select(.scenario==$s) | .client_node != .server_node' "$TMP/run.json" >/dev/null || fail "$s not across nodes"
done
# Each scenario measured the right target: pod IP, node IP, ClusterIP.
jq -e '[.samples[] | select(.scenario=="service") | .target | startswith("10.96.")] | all' "$TMP/run.json" >/dev/null || fail "service did not go through a ClusterIP"
jq -e '[.samples[] | select(.scenario=="host-network") | .target | startswith("10.250.0.")] | all' "$TMP/run.json" >/dev/null || fail "host-network did not target a node IP"
jq -e '[.samples[] | select(.scenario|test("^pod-")) | .target | startswith("10.244.")] | all' "$TMP/run.json" >/dev/null || fail "pod scenarios did not target pod IPs"

step "results stored"
want=$((4 * 5 * 2))
got=$(sqlite3 "$CNIBENCH_DB" "SELECT COUNT(*) FROM samples s JOIN runs r ON r.id=s.run_id WHERE r.name='$NAME' AND s.result_json IS NOT NULL AND s.error=''")
[ "$got" = "$want" ] || fail "store holds $got good samples of $NAME, want $want"
sqlite3 "$CNIBENCH_DB" "SELECT kind, complete, baseline FROM runs WHERE name='$NAME'" | grep -qx 'k8s|1|host-network' || fail "run row not kind k8s / complete / host baseline"
[ "$(sqlite3 "$CNIBENCH_DB" "SELECT COUNT(*) FROM arms a JOIN runs r ON r.id=a.run_id WHERE r.name='$NAME'")" = 4 ] || fail "want 4 arms"

if "$BIN" report --help >/dev/null 2>&1; then
  step "report"
  "$BIN" report "$NAME" | tee "$TMP/report.txt"
  for s in pod-same-node pod-cross-node host-network service; do
    grep -q "$s" "$TMP/report.txt" || fail "report lacks $s"
  done
else
  fail "cnibench report is not in this binary"
fi

step "k8s run --profile: client pods sample their node; profiles stored; stages reported"
"$BIN" k8s run --image-pull-policy Never --scenarios pod-same-node,pod-cross-node --test tcp_lat --msg-size 1 \
  --duration 1s --warmup 300ms --repeats 2 --profile --json >"$TMP/prof.json" 2>"$TMP/prof.log" \
  || fail "profiled run: $(tail -1 "$TMP/prof.log")"
no_pod_failed "$TMP/prof.json" "profiled run"
left_nothing "$TMP/prof.json" "profiled run"
PNAME=$(run_name "$TMP/prof.json")
np=$(sqlite3 "$CNIBENCH_DB" "SELECT COUNT(*) FROM profiles p JOIN runs r ON r.id=p.run_id WHERE r.name='$PNAME' AND p.samples > 0 AND p.folded LIKE '%cnibench;%'")
[ "$np" = 4 ] || fail "want 4 stored window profiles of $PNAME, got $np"
"$BIN" report "$PNAME" | tee "$TMP/prof-report.txt" | grep -A2 "CPU by datapath stage"
grep -q "pod-cross-node tcp_lat 1B: .* CPU-µs per transaction" "$TMP/prof-report.txt" || fail "no stage costs in the report"
"$BIN" explain "$PNAME" pod-same-node pod-cross-node >"$TMP/explain.txt" || fail "explain: $(tail -1 "$TMP/explain.txt")"
head -3 "$TMP/explain.txt"  # not `| head`: explain would get SIGPIPE, and pipefail ends the tier

step "node choice: --client-node/--server-node are honoured"
"$BIN" k8s run --image-pull-policy Never --scenarios pod-cross-node --client-node k8slab-n2 --server-node k8slab-n1 \
  --test tcp_lat --msg-size 64 --duration 1s --warmup 200ms --json >"$TMP/swap.json" 2>"$TMP/swap.log" \
  || fail "run with chosen nodes: $(tail -1 "$TMP/swap.log")"
jq -e '.plan.placements[0] | .client_node == "k8slab-n2" and .server_node == "k8slab-n1"' "$TMP/swap.json" >/dev/null \
  || fail "chosen nodes not used: $(jq -c '.plan.placements' "$TMP/swap.json")"
jq -e '.samples | length == 1 and (.[0].results | length == 1)' "$TMP/swap.json" >/dev/null || fail "chosen-node run gave no result"
left_nothing "$TMP/swap.json" "chosen-node run"

step "node choice by label, and a tainted node: --client/--server-node-selector, --tolerate-taints"
# n2 becomes a tainted "client pool" node, n1 the server pool; the taint and
# labels are removed again right after (the cluster is purged on exit anyway).
kubectl label node k8slab-n2 cnibench-e2e/pool=client --overwrite >/dev/null
kubectl label node k8slab-n1 cnibench-e2e/pool=server --overwrite >/dev/null
kubectl taint node k8slab-n2 cnibench-e2e/dedicated=perf:NoSchedule --overwrite >/dev/null
untaint() {
  kubectl taint node k8slab-n2 cnibench-e2e/dedicated- >/dev/null 2>&1 || true
  kubectl label node k8slab-n1 k8slab-n2 cnibench-e2e/pool- >/dev/null 2>&1 || true
}
SEL=(--client-node-selector cnibench-e2e/pool=client --server-node-selector cnibench-e2e/pool=server)
# Without a toleration the only client-pool node is out: a usage error naming why, nothing created.
set +e
"$BIN" k8s run --image-pull-policy Never --scenarios pod-cross-node "${SEL[@]}" --test tcp_lat --msg-size 64 \
  --duration 1s --warmup 200ms --json >"$TMP/taint.json" 2>"$TMP/taint.log"
rc=$?
set -e
[ $rc = 2 ] || { untaint; fail "tainted client pool without --tolerate-taints: exit $rc, want 2 ($(tail -1 "$TMP/taint.log"))"; }
grep -q "taint" "$TMP/taint.log" || { untaint; fail "the refusal does not name the taint: $(tail -1 "$TMP/taint.log")"; }
echo "e2e-k8s: refused as expected: $(tail -1 "$TMP/taint.log")"
"$BIN" k8s run --image-pull-policy Never --scenarios pod-cross-node "${SEL[@]}" --tolerate-taints --test tcp_lat \
  --msg-size 64 --duration 1s --warmup 200ms --json >"$TMP/sel.json" 2>"$TMP/sel.log" \
  || { untaint; fail "run by label with --tolerate-taints: $(tail -1 "$TMP/sel.log")"; }
untaint
jq -e '.plan.placements[0] | .client_node == "k8slab-n2" and .server_node == "k8slab-n1"' "$TMP/sel.json" >/dev/null \
  || fail "label selectors not honoured: $(jq -c '.plan.placements' "$TMP/sel.json")"
jq -e '.samples | length == 1 and (.[0].results | length == 1)' "$TMP/sel.json" >/dev/null || fail "run by label gave no result"
left_nothing "$TMP/sel.json" "run by label"

step "pod-to-host, host-to-pod, hairpin, --parallel through the Service, --agent-cpu"
"$BIN" k8s run --image-pull-policy Never --scenarios pod-to-host,host-to-pod,hairpin,service --test tcp_lat,tcp_bw \
  --msg-size 64 --duration 1s --warmup 200ms --parallel 2 --agent-cpu --json >"$TMP/new.json" 2>"$TMP/new.log" \
  || fail "new scenarios: $(tail -1 "$TMP/new.log")"
no_pod_failed "$TMP/new.json" "run"
left_nothing "$TMP/new.json" "new scenarios run"
jq -e '[.samples[].scenario] | unique | length == 4' "$TMP/new.json" >/dev/null || fail "want 4 scenarios measured"
jq -e '[.samples[] | select(.scenario=="pod-to-host") | .target | startswith("10.250.0.")] | all' "$TMP/new.json" >/dev/null || fail "pod-to-host did not target a node IP"
jq -e '[.samples[] | select(.scenario=="host-to-pod") | .target | startswith("10.244.")] | all' "$TMP/new.json" >/dev/null || fail "host-to-pod did not target a pod IP"
jq -e '[.samples[] | select(.scenario=="hairpin") | .target | startswith("10.96.")] | all' "$TMP/new.json" >/dev/null || fail "hairpin did not go through a ClusterIP"
jq -e '.plan.placements[] | select(.scenario=="hairpin") | .client_node == .server_node' "$TMP/new.json" >/dev/null || fail "hairpin not on one node"
jq -e '[.samples[] | select(.scenario=="service") | .results[] | select(.test=="tcp_bw") | .streams | length == 2] | all' "$TMP/new.json" >/dev/null || fail "--parallel 2 through the Service did not give 2 streams"
# kube-proxy runs in each k8slab node's network namespace: every window has its CPU.
jq -e '[.samples[].results[] | .cpu.datapath.seconds != null and ([.cpu.datapath.agents[].process] | index("kube-proxy") != null)] | all' "$TMP/new.json" >/dev/null \
  || fail "agents' CPU missing: $(jq -c '[.samples[].results[] | .missing["cpu.datapath"] // .missing["cpu.datapath.seconds"]][0]' "$TMP/new.json")"
grep -q "pod-to-host: measures against the server of\|pod-to-host: server" "$TMP/new.log" || fail "pod-to-host server not reported"

step "one schedulable node: two-node scenarios are skipped with the reason"
kubectl cordon k8slab-n2 >/dev/null
"$BIN" k8s run --image-pull-policy Never --test tcp_lat --msg-size 64 --duration 1s --warmup 200ms \
  --json >"$TMP/one.json" 2>"$TMP/one.log" || { kubectl uncordon k8slab-n2 >/dev/null; fail "one-node run: $(tail -1 "$TMP/one.log")"; }
kubectl uncordon k8slab-n2 >/dev/null
for s in pod-cross-node host-network; do
  jq -e --arg s $s '.plan.placements[] | select(.scenario==$s) | .skip | test("needs two schedulable nodes")' "$TMP/one.json" >/dev/null \
    || fail "$s not skipped with a reason on one node"
done
[ "$(jq '[.samples[].scenario] | unique | length' "$TMP/one.json")" = 2 ] || fail "one-node run should measure pod-same-node and service"
grep -q "pod-cross-node: skipped: needs two schedulable nodes" "$TMP/one.log" || fail "skip not reported on stderr"
left_nothing "$TMP/one.json" "one-node run"

step "error path: missing image is reported in one line and leaves nothing"
if "$BIN" k8s run --image-pull-policy Never --image localhost/cnibench:does-not-exist --scenarios pod-same-node \
     --test tcp_lat --msg-size 64 --duration 1s --ready-timeout 60s >/dev/null 2>"$TMP/err.log"; then
  fail "run with a missing image succeeded"
fi
tail -1 "$TMP/err.log"
tail -1 "$TMP/err.log" | grep -q "image pull error on node k8slab-n1: ErrImageNeverPull" || fail "missing image not explained"
# Its own objects (by run id) are gone when it returns, and so are those of
# every run this tier made before it. Objects of other runs (another job on
# this machine's one cluster) are named, not counted.
id=$(grep -o 'cnb-[a-z0-9]*-pod-same-node-srv' "$TMP/err.log" | head -1 | cut -d- -f2)
[ -n "$id" ] || fail "no run id in the error: $(tail -1 "$TMP/err.log")"
[ -z "$(left "$id")" ] || fail "failed run $id left objects: $(left "$id" | tr '\n' ';')"
for r in "${RUNS[@]}"; do
  [ -z "$(left "$r")" ] || fail "run $r of this tier left objects: $(left "$r" | tr '\n' ';')"
done
[ -z "$(left)" ] || echo "e2e-k8s: objects of runs not this tier's (another job?): $(left | tr '\n' ';')"
# The namespace it created is deleted too (it may still be terminating).
[ "$(ns_phase cnibench)" != Active ] || fail "failed run left its namespace active"

step "Ctrl-C path: SIGINT during the run deletes what it created"
"$BIN" k8s run --image-pull-policy Never --scenarios default --test tcp_lat --msg-size 64 --duration 20s \
  --repeats 3 >/dev/null 2>"$TMP/int.log" &
pid=$!
for _ in $(seq 1 120); do
  [ -n "$(kubectl get pods -n cnibench -l cnibench.io/role=client -o name 2>/dev/null)" ] && break
  sleep 0.5
done
[ -n "$(kubectl get pods -n cnibench -l cnibench.io/role=client -o name 2>/dev/null)" ] || fail "no client pod appeared"
kill -INT $pid
rc=0; wait $pid || rc=$?
[ $rc = 1 ] || fail "interrupted run exited $rc, want 1"
grep -q "interrupted" "$TMP/int.log" || fail "interrupted run did not say so: $(tail -1 "$TMP/int.log")"
iid=$(sed -n 's/^run \([a-z0-9]*\) in namespace .*/\1/p' "$TMP/int.log" | head -1)
[ -n "$iid" ] || fail "interrupted run did not name its run id: $(head -3 "$TMP/int.log")"
[ -z "$(left "$iid")" ] || fail "interrupted run $iid left objects: $(left "$iid" | tr '\n' ';')"
[ "$(ns_phase cnibench)" != Active ] || fail "interrupted run left its namespace active"
sqlite3 "$CNIBENCH_DB" "SELECT complete FROM runs ORDER BY id DESC LIMIT 1" | grep -qx 0 || fail "interrupted run stored as complete"

if "$BIN" tune audit --help >/dev/null 2>&1; then
  step "k8s audit: tune audit on every node"
  "$BIN" k8s audit --image-pull-policy Never | tee "$TMP/audit.txt"
  head -1 "$TMP/audit.txt" | grep -q "k8slab-n1.*k8slab-n2" || fail "audit table lacks a node column"
  [ "$(wc -l <"$TMP/audit.txt")" -gt 3 ] || fail "audit table has no knobs"
  grep -q "no audit" "$TMP/audit.txt" && fail "a node's audit failed"
else
  echo "e2e-k8s: k8s audit: SKIPPED: this binary has no 'cnibench tune audit'"
fi

if command -v qperf >/dev/null && command -v iperf3 >/dev/null && command -v sockperf >/dev/null; then
  step "image build --with-tools (reproducible) + k8s run --engine builtin,qperf: the cross-check in pods"
  "$BIN" image build --with-tools -o "$TMP/tools.tar" | tee "$TMP/tools.txt"
  TREF=$(sed -n 's/^wrote [^ ]*: \([^ ]*\) .*/\1/p' "$TMP/tools.txt")
  [ "$TREF" = "$REF-tools" ] || fail "tools image named $TREF, want $REF-tools"
  "$BIN" image build --with-tools -o "$TMP/tools-again.tar" >/dev/null
  cmp -s "$TMP/tools.tar" "$TMP/tools-again.tar" || fail "image build --with-tools is not reproducible"
  "$K8SLAB" import "$TMP/tools.tar" >/dev/null
  "$BIN" k8s run --image-pull-policy Never --engine builtin,qperf --scenarios pod-cross-node --test tcp_lat,tcp_bw \
    --msg-size 1K --duration 1s --warmup 200ms --json >"$TMP/xc.json" 2>"$TMP/xc.log" \
    || fail "cross-check run: $(tail -1 "$TMP/xc.log")"
  no_pod_failed "$TMP/xc.json" "cross-check"
  jq -e '[.samples[] | select(.engine == "qperf") | .results[] | .tool.name] == ["qperf", "qperf"]' "$TMP/xc.json" >/dev/null \
    || fail "qperf pod gave no qperf results: $(jq -c '[.samples[] | select(.engine == "qperf")]' "$TMP/xc.json" | head -c 400)"
  # seed 000's command line, pod to pod.
  jq -e '[.samples[] | select(.engine == "qperf") | .results[] | .tool.command | join(" ")]
         | all(test("^qperf -t 1 10\\.244\\.[0-9.]+ -lp 19765 -ub -oo msg_size:1024 -vu"))' "$TMP/xc.json" >/dev/null \
    || fail "qperf command lines: $(jq -c '[.samples[] | .results[]? | .tool.command]' "$TMP/xc.json")"
  XNAME=$(jq -r '"cnb-" + .plan.run_id + "-k8s"' "$TMP/xc.json")
  "$BIN" report "$XNAME" | tee "$TMP/xc-report.txt" | head -20
  grep -q "pod-cross-node/qperf" "$TMP/xc-report.txt" || fail "report lacks the qperf arm"
  step "error path: --engine qperf with the plain image names image build --with-tools"
  if "$BIN" k8s run --image-pull-policy Never --image "$REF" --engine qperf --scenarios pod-cross-node \
       --test tcp_lat --msg-size 64 --duration 1s >/dev/null 2>"$TMP/notools.log"; then
    fail "qperf run with the plain image succeeded"
  fi
  tail -1 "$TMP/notools.log"
  tail -1 "$TMP/notools.log" | grep -q "cnibench image build --with-tools" || fail "missing tools not explained"
else
  echo "e2e-k8s: --with-tools: SKIPPED: qperf, iperf3 or sockperf is not installed (scripts/install-deps.sh installs them)"
fi

step "k8s clean leaves nothing"
kubectl create namespace cnb-e2e-leftover >/dev/null
kubectl label namespace cnb-e2e-leftover app.kubernetes.io/managed-by=cnibench >/dev/null
"$BIN" k8s clean
kubectl get ns
kubectl get ns -l app.kubernetes.io/managed-by=cnibench -o name | grep -q . && fail "cnibench namespaces left"
[ -z "$(kubectl get pods,svc,ds -A -l app.kubernetes.io/managed-by=cnibench -o name)" ] || fail "cnibench objects left"
step "PASS"
