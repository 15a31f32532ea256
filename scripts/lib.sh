# Shared by the scripts in this folder (sourced, not run):
#
#   . "$(dirname "$0")/lib.sh"
#   cnb_script NAME
#
# Sourcing it sets bash's strict mode and moves to the repository's root;
# ROOT is that folder and BIN the cnibench binary (CNIBENCH_BIN, else
# bin/cnibench).
# NAME prefixes every line the script prints, so that a CI log that runs
# several of them says which one failed. Everything here is shell the
# scripts used to repeat: preconditions, the k8slab lookup, image builds and
# bringing a cluster up with the image imported into both nodes.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
BIN=${CNIBENCH_BIN:-$ROOT/bin/cnibench}

# cnb_script NAME: the prefix for fail/step and the clock step counts from.
cnb_script() {
  CNB_SCRIPT=$1
  CNB_T0=$(date +%s)
}

fail() { echo "$CNB_SCRIPT: FAIL: $*" >&2; exit 1; }
step() { echo "$CNB_SCRIPT: [$(date -u +%T) +$(( $(date +%s) - CNB_T0 ))s] $*"; }

# locked CMD...: CMD under `flock -x $CNB_LOCK` when CNB_LOCK is set (a
# shared machine's CPU lock around a measurement), else CMD as it is.
locked() { if [ -n "${CNB_LOCK:-}" ]; then flock -x "$CNB_LOCK" "$@"; else "$@"; fi; }

# need_root WHY, need_bin, need_tool TOOL...: one-line failures naming the fix.
need_root() { [ "$(id -u)" = 0 ] || fail "needs root${1:+ ($1)}"; }
need_bin() { [ -x "$BIN" ] || fail "$BIN missing: run make build"; }
need_tool() {
  local t
  for t in "$@"; do command -v "$t" >/dev/null || fail "needs $t (scripts/install-deps.sh)"; done
}

# find_k8slab: K8SLAB as given, or ../shared/k8slab next to the repository
# (or next to the worktree folder).
find_k8slab() {
  local c
  if [ -z "${K8SLAB:-}" ]; then
    for c in "$ROOT/../shared/k8slab/k8slab" "$ROOT/../../shared/k8slab/k8slab"; do
      if [ -x "$c" ]; then K8SLAB=$(readlink -f "$c"); break; fi
    done
  fi
  [ -n "${K8SLAB:-}" ] && [ -x "$K8SLAB" ] || fail "k8slab not found: set K8SLAB=/path/to/k8slab/k8slab"
}

# build_image TAR [FLAGS...]: `cnibench image build` into TAR; sets REF to
# the reference it printed. Its output is kept next to TAR (TAR.txt).
build_image() {
  local tar=$1
  shift
  "$BIN" image build "$@" -o "$tar" >"$tar.txt" || { cat "$tar.txt"; fail "image build $*"; }
  REF=$(sed -n 's/^wrote [^ ]*: \([^ ]*\) .*/\1/p' "$tar.txt")
  [ -n "$REF" ] || fail "image build $* printed no reference"
}

# cluster_up LOGDIR TAG TAR [VAR=VALUE...]: k8slab down, then a 2-node
# k8slab up with the given environment (CNI=..., KUBE_PROXY_MODE=...), its
# kubectl environment, and TAR imported into both nodes. Logs go to
# LOGDIR/{down,up,import}-TAG.
cluster_up() {
  local dir=$1 tag=$2 tar=$3
  shift 3
  "$K8SLAB" down >"$dir/down-$tag.log" 2>&1 || { tail -5 "$dir/down-$tag.log"; fail "k8slab down before $tag"; }
  env "$@" NODES=2 "$K8SLAB" up >"$dir/up-$tag.log" 2>&1 || { tail -20 "$dir/up-$tag.log"; fail "$* k8slab up"; }
  eval "$("$K8SLAB" env)"
  "$K8SLAB" import "$tar" >"$dir/import-$tag.txt"
  [ "$(grep -c "imported $REF" "$dir/import-$tag.txt")" = 2 ] || fail "$tag: image $REF not imported into both nodes"
}

# run_name JSON: the stored name of the run a `--json` document describes.
run_name() { jq -r '"cnb-" + .plan.run_id + "-k8s"' "$1"; }

# no_pod_failed JSON WHAT: fails naming the first client pod's error when any
# sample of the `k8s run --json` document JSON carries one.
no_pod_failed() {
  jq -e '[.samples[] | select(.error)] | length == 0' "$1" >/dev/null ||
    fail "$2: a client pod failed: $(jq -c '[.samples[] | select(.error) | .error][0]' "$1")"
}

# out_dir NAME: OUT as given, else a new /tmp/cnb-NAME.XXXXXX; created.
out_dir() {
  OUT=${OUT:-$(mktemp -d "/tmp/cnb-$1.XXXXXX")}
  mkdir -p "$OUT"
}

# k8slab_logged LOG ARGS...: k8slab ARGS with its output in LOG, the end of
# which is shown when it fails.
k8slab_logged() {
  local log=$1
  shift
  "$K8SLAB" "$@" >"$log" 2>&1 || { tail -20 "$log"; fail "k8slab $*"; }
}

# k8slab_prepare LOGDIR [flannel]: k8slab install and build (and flanneld's
# build) — no-ops when its cache is warm, about 8 (+2) minutes cold.
k8slab_prepare() {
  k8slab_logged "$1/install.log" install
  k8slab_logged "$1/build.log" build
  [ -z "${2:-}" ] || k8slab_logged "$1/build-$2.log" build "$2"
}

# purge_on_exit DIR: when the script exits, however it exits, the cluster
# is purged (`k8slab down --purge`) and DIR removed; the exit status stays.
purge_on_exit() {
  CNB_PURGE_DIR=$1
  trap cnb_purge EXIT
}
cnb_purge() {
  local rc=$?
  step "tearing down (k8slab down --purge)"
  "$K8SLAB" down --purge >"$CNB_PURGE_DIR/down.log" 2>&1 ||
    { echo "$CNB_SCRIPT: k8slab down failed:"; tail -5 "$CNB_PURGE_DIR/down.log"; }
  rm -rf "$CNB_PURGE_DIR"
  exit $rc
}

# check_blackhole JSON HOLD_MS: every blackhole event of the last arm of a
# `k8s disrupt` result shows a longest gap of HOLD_MS within one bucket, in
# every probe (the timeline's resolution, checked on a cluster); prints
# the gaps.
check_blackhole() {
  local json=$1 hold=$2
  jq -r '.arms[-1].timelines[] | .probe + ": gaps " + ([.events[] | select(.kind == "blackhole") | .longest_gap_ms | tostring] | join(" ")) + " ms (bucket " + (.bucket_ms | tostring) + " ms)"' "$json"
  jq -e --argjson h "$hold" '[.arms[-1].timelines[] | .bucket_ms as $b | .events[] | select(.kind == "blackhole") |
    (.longest_gap_ms - $h) | fabs <= $b] | length > 0 and all' "$json" >/dev/null ||
    fail "$json: a blackhole of $hold ms not within one bucket of its gap"
}
