#!/usr/bin/env bash
# make bench-gate: the regression gate's error rates, measured by running it
# (issue 13: a 10 % slowdown caught in ≥ 9 of 10 trials, the same
# configuration twice passing in ≥ 9 of 10).
#
# The slowdown is real, not simulated: arm "pod" is a `native` lab whose
# server node filters the pod's ingress NetworkPolicy-style (lab knob
# policies=N, policy_mode=linear: N rules walked in order for every new
# connection). The base configuration has 1 rule, the slowed one
# SLOW_POLICIES rules (default 2000: tcp_crr 6-17 % slower, median 12 %, in
# the trials of docs/reports.md).
#
# MODE=interleaved (the default) runs ONE experiment per trial with three
# arms, alternating repeat by repeat — base (1 rule), slowed (SLOW_POLICIES),
# same (1 rule) — and gates arm against arm within it (compare R@base
# R@slowed must exit 1, R@base R@same must exit 0): what changes between
# separate runs on a shared machine then lands on every arm alike.
# MODE=separate runs four separate experiments per trial, as a CI job
# comparing two runs would, then gates two pairs with two rules:
#   base, slowed  -> cnibench compare base slowed --fail-on RULE   must exit 1
#   base, base    -> cnibench compare base base2  --fail-on RULE   must exit 0
# RULE_TXN  'slower>5%': the table's tcp_crr cell, transactions per second;
# RULE_CPU  'tcp_crr/client_cpu_us_per_txn:worse>5%': CPU per transaction.
# Each trial holds the exclusive CPU lock (/tmp/cnb-cpu.lock) only while it
# measures (about two minutes), so other work on a shared machine waits
# between trials rather than disturbing one.
. "$(dirname "$0")/lib.sh"
cnb_script bench-gate
TRIALS=${TRIALS:-10}
REPEATS=${REPEATS:-40}
DURATION=${DURATION:-500ms}
WARMUP=${WARMUP:-200ms}
SLOW_POLICIES=${SLOW_POLICIES:-2000}
RULE_TXN=${RULE_TXN:-slower>5%}
RULE_CPU=${RULE_CPU:-tcp_crr/client_cpu_us_per_txn:worse>5%}
LOCK=${LOCK:-/tmp/cnb-cpu.lock}
# CPUS: the experiments' cpus: setting (none = the scheduler places the
# client and server; client=0,server=1 pins them).
CPUS=${CPUS:-none}
MODE=${MODE:-interleaved}
case $MODE in separate | interleaved) ;; *) echo "bench-gate: MODE must be separate or interleaved" >&2; exit 2 ;; esac
out_dir bench-gate
DB=$OUT/gate.db
need_root "it builds labs"
need_bin
need_tool jq
"$BIN" compare --help >/dev/null

# experiment NAME POLICIES: one arm "pod" measuring tcp_crr.
experiment() {
  cat >"$OUT/$1.yaml" <<EOF
name: $1
description: bench-gate arm with $2 linear NetworkPolicy rules on the server pod's ingress
tests: [tcp_crr]
msg_sizes: [1]
duration: $DURATION
warmup: $WARMUP
repeats: $REPEATS
baseline: pod
wakeup: none
cpus: $CPUS
arms:
  - {name: pod, topology: native, knobs: {policies: "$2", policy_mode: linear}}
EOF
}
experiment bench-gate-base 1
experiment bench-gate-slowed "$SLOW_POLICIES"
cat >"$OUT/bench-gate-trial.yaml" <<EOF
name: bench-gate-trial
description: bench-gate, interleaved - base (1 rule), slowed ($SLOW_POLICIES rules), same (1 rule)
tests: [tcp_crr]
msg_sizes: [1]
duration: $DURATION
warmup: $WARMUP
repeats: $REPEATS
baseline: base
wakeup: none
cpus: $CPUS
arms:
  - {name: base, topology: native, knobs: {policies: "1", policy_mode: linear}}
  - {name: slowed, topology: native, knobs: {policies: "$SLOW_POLICIES", policy_mode: linear}}
  - {name: same, topology: native, knobs: {policies: "1", policy_mode: linear}}
EOF

# run NAME: one experiment into $DB; prints the new run's id.
run() {
  "$BIN" run "$OUT/$1.yaml" --db "$DB" --format none 2>>"$OUT/runs.log" >&2 || return 1
  "$BIN" runs --db "$DB" --json | jq '.[-1].id'
}

# gate A B TAG RULE METRIC: compare with the rule; prints "exit delta p" of
# the row of METRIC.
gate() {
  local rc=0
  "$BIN" compare "$1" "$2" --db "$DB" --fail-on "$4" --junit "$OUT/$3.xml" --format json -o "$OUT/$3.json" \
    2>>"$OUT/gate.log" || rc=$?
  jq -r --arg rc "$rc" --arg m "$5" '.rows[] | select(.metric == $m) | "\($rc) \(.delta_pct * 10 | round / 10) \(if .p < 0.001 then "<0.001" else (.p * 1000 | round / 1000) end)"' "$OUT/$3.json"
}

echo "bench-gate: tcp_crr on a native lab, $REPEATS × $DURATION per run, wakeup none, cpus $CPUS; slowed = $SLOW_POLICIES"
echo "  linear policy rules vs 1; $TRIALS trials ($MODE: $([ "$MODE" = separate ] && echo "4 runs" || echo "1 run of 3 arms") each); rules '$RULE_TXN' and '$RULE_CPU'; results in $OUT"
printf '%-5s %-5s %-34s %-34s\n' trial load "transactions/s: slowed | same" "CPU per txn: slowed | same"
declare -A miss alarm
miss=([txn]=0 [cpu]=0); alarm=([txn]=0 [cpu]=0)
bad=0
# verdict KIND RC_SLOWED RC_SAME: count them and word them in $V (not
# through $(…): the counters must survive).
verdict() {
  local w1=caught w2=passed
  [ "$2" = 1 ] || { w1="MISSED(exit $2)"; miss[$1]=$((miss[$1] + 1)); }
  [ "$3" = 0 ] || { w2="FALSE-ALARM(exit $3)"; alarm[$1]=$((alarm[$1] + 1)); }
  V="$w1 | $w2"
}
for i in $(seq 1 "$TRIALS"); do
  # One trial under the exclusive lock; the ids come back on stdout.
  if ! ids=$(flock -x "$LOCK" bash -c "
      set -e
      $(declare -f run); BIN='$BIN'; OUT='$OUT'; DB='$DB'
      uptime | sed 's/.*average: //; s/,.*//' >'$OUT/load-$i'
      if [ $MODE = interleaved ]; then
        r=\$(run bench-gate-trial); echo \$r@base \$r@slowed \$r@base \$r@same
      else
        a=\$(run bench-gate-base); b=\$(run bench-gate-slowed); c=\$(run bench-gate-base); d=\$(run bench-gate-base)
        echo \$a \$b \$c \$d
      fi"); then
    echo "trial $i: a run failed (see $OUT/runs.log)"; bad=$((bad + 1)); continue
  fi
  read -r a b c d <<<"$ids"
  read -r t1 dt1 pt1 <<<"$(gate "$a" "$b" "txn-slowed-$i" "$RULE_TXN" transactions_per_sec)"
  read -r t2 dt2 pt2 <<<"$(gate "$c" "$d" "txn-same-$i" "$RULE_TXN" transactions_per_sec)"
  read -r c1 dc1 pc1 <<<"$(gate "$a" "$b" "cpu-slowed-$i" "$RULE_CPU" client_cpu_us_per_txn)"
  read -r c2 dc2 pc2 <<<"$(gate "$c" "$d" "cpu-same-$i" "$RULE_CPU" client_cpu_us_per_txn)"
  verdict txn "$t1" "$t2"; vt=$V; verdict cpu "$c1" "$c2"; vc=$V
  printf '%-5s %-5s %-34s %-34s\n' "$i" "$(cat "$OUT/load-$i")" "$dt1% p=$pt1 | $dt2% p=$pt2" "$dc1% p=$pc1 | $dc2% p=$pc2"
  printf '%-5s %-5s %-34s %-34s\n' "" "" "$vt" "$vc"
done
n=$((TRIALS - bad))
echo
for k in txn cpu; do
  rule=$RULE_TXN; [ $k = cpu ] && rule=$RULE_CPU
  echo "$rule: slowdown caught in $((n - miss[$k])) of $n trials (false negatives ${miss[$k]}/$n); same configuration passed in $((n - alarm[$k])) of $n (false positives ${alarm[$k]}/$n)"
done
[ "$bad" = 0 ] || echo "$bad trial(s) did not complete (a run failed; see $OUT/runs.log)"
