#!/usr/bin/env bash
# make bench-answer: issue 13's targets, measured by running them.
#
# RUNS times (default 3): `cnibench run default` exactly as `make run` runs
# it (precision-driven, built-in defaults), each into one results database,
# timed. Per run it prints the wall time, the share of table cells whose
# median's 95% CI half-width is within PRECISION (default 5%) of the median,
# and the vxlan-vs-host verdict on the four metrics. Then the history of the
# stored runs (change points), and the gate's error rates when
# scripts/bench-gate.sh exists (GATE=0 skips it: it takes 20-40 minutes).
#
# Targets (docs/reports.md): ≤ 5 min per run, ≥ 90% of cells within ±5%,
# vxlan vs host significant on all four metrics.
. "$(dirname "$0")/lib.sh"
cnb_script bench-answer
RUNS=${RUNS:-3}
PRECISION=${PRECISION:-0.05}
out_dir bench-answer
DB=$OUT/answer.db
need_root "it builds labs"
need_bin
need_tool jq

echo "bench-answer: $RUNS runs of the default experiment into $DB ($(uptime | sed 's/.*load/load/'))"
printf '%-4s %9s %18s %s\n' run "wall (s)" "cells within ±$(awk "BEGIN{print $PRECISION*100}")%" "vxlan vs host (tcp_lat udp_lat tcp_bw udp_bw)"
pass=0
for i in $(seq 1 "$RUNS"); do
  t0=$(date +%s)
  "$BIN" run default --db "$DB" --format none 2>"$OUT/run-$i.log" || true
  t1=$(date +%s)
  json=$("$BIN" report last --db "$DB" --format json)
  # The table's cells: each test's primary metric, one per arm and size.
  # Half-width as the report and the precision rule use it: the larger
  # distance from the median to either end of its CI.
  cells=$(jq -r --argjson p "$PRECISION" '
    [.runs[0].cells[] | select(.n > 0)
     | select(.metric == ({"tcp_lat":"one_way_mean_us","udp_lat":"one_way_mean_us","tcp_crr":"transactions_per_sec","tcp_bw":"receiver_mbps","udp_bw":"receiver_mbps"}[.test] // .metric))
     | ([.median - .median_ci.low, .median_ci.high - .median] | max) as $hw
     | (if .median < 0 then -.median else .median end) as $m
     | {arm, test, metric, ok: (if $m == 0 then $hw == 0 else ($hw / $m) <= $p end)}]
    | "\(map(select(.ok)) | length)/\(length)"' <<<"$json")
  verdict=$(jq -r '
    [.runs[0].cells[] | select(.arm == "vxlan" and .vs_baseline != null)
     | select(.metric == ({"tcp_lat":"one_way_mean_us","udp_lat":"one_way_mean_us","tcp_bw":"receiver_mbps","udp_bw":"receiver_mbps"}[.test]))
     | "\(.test):p=\(.vs_baseline.p | tostring | .[0:6])\(if .vs_baseline.p < 0.05 then "*" else "" end)"] | join(" ")' <<<"$json")
  printf '%-4s %9s %18s %s\n' "$i" "$((t1 - t0))" "$cells" "$verdict"
done
echo "(* = significant at α=0.05; run logs in $OUT)"

if "$BIN" history --help >/dev/null 2>&1; then
  echo
  "$BIN" history default --db "$DB" || true
fi
if [ "${GATE:-1}" != 0 ] && [ -x scripts/bench-gate.sh ]; then
  echo
  CNIBENCH_BIN=$BIN scripts/bench-gate.sh || true
fi
