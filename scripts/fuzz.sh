#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 30s).
# A crash leaves its input under the package's testdata/fuzz/<Target>/,
# which `go test` then replays as a regression test: commit it with the fix.
# Prints one line per target: package, target, executions, new inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}
# Go minimises every new interesting input (and a crasher) for up to 60 s
# by default, and a minimisation still running when FUZZTIME ends fails the
# target with "context deadline exceeded" — with any minimisation time, as a
# 1 s limit still showed. So by default nothing is minimised; a crasher is
# kept as found. FUZZMINIMIZETIME=10s minimises for a readable crasher
# (and risks that spurious failure).
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-0}
fail=0
for pkg in $(go list ./...); do
  targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for t in $targets; do
    log=$(mktemp)
    if go test -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" >"$log" 2>&1; then
      execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
      echo "fuzz: ok   ${pkg#github.com/cnibench/cnibench/} $t execs=${execs:-?} ($FUZZTIME)"
    elif grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log" && ! grep -q -- '--- FAIL: .*/' "$log"; then
      # The toolchain's own teardown at the deadline (a worker still busy
      # when the time is up), seen on targets that found nothing: no input
      # failed, so the pass stands. Any crash writes its input and fails.
      execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
      echo "fuzz: ok   ${pkg#github.com/cnibench/cnibench/} $t execs=${execs:-?} ($FUZZTIME; go reported its deadline, no failing input)"
    else
      echo "fuzz: FAIL ${pkg#github.com/cnibench/cnibench/} $t"
      sed 's/^/    /' "$log" | tail -30
      fail=1
    fi
    rm -f "$log"
  done
done
exit $fail
