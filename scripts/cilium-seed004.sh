#!/usr/bin/env bash
# Seed 004's tables on real Cilium 1.20.2 (k8slab's addons/cilium), each
# beside the lab's model of the same comparison, with the model/Cilium
# ratio (docs/reproductions.md, "seed 004 on real Cilium"):
#
#   lab:      cnibench run cilium-model (native, vxlan, ±fastpath) and
#             cilium-kpr-model (kube-proxy's rules for N Services, direct)
#   tunnel:   A–B–A–C–A on one cluster recipe: native routing (A), VXLAN
#             (B), BPF host routing (C), all with the replacement and no
#             kube-proxy; pod-cross-node, tcp_lat/tcp_crr/tcp_bw at 1 B,
#             1 KiB, 4 KiB, 64 KiB, --profile --agent-cpu
#   services: through a Service behind N = 0, 1,000, 10,000 others with
#             kube-proxy iptables, then the replacement, then kube-proxy
#             iptables again at 10,000 (A–B–A), then kube-proxy nftables
#
# Every measurement runs under `flock -x $CNB_LOCK`; cluster setup does
# not. Between modes the addon's teardown.sh purges the cluster, and on
# exit too. Environment: OUT=DIR (results.db, runs' JSON, logs, tables.md),
# CNB_LOCK=/tmp/cnb-measure.lock, REPEATS=6, PARTS="lab tunnel services",
# TABLES_ONLY=1 (recompute tables.md from OUT's runs).
. "$(dirname "$0")/lib.sh"
cnb_script cilium-seed004
REPEATS=${REPEATS:-6}
PARTS=${PARTS:-"lab tunnel services"}
CNB_LOCK=${CNB_LOCK:-/tmp/cnb-measure.lock}

need_root
find_k8slab
need_bin
need_tool jq
out_dir cilium-seed004
export CNIBENCH_DB=$OUT/results.db
ADDON=$(dirname "$K8SLAB")/addons/cilium
cp "$BIN" "$OUT/cnibench"
BIN=$OUT/cnibench
touch "$OUT/runs.txt" # one line per stored run: part label name

has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
record() { echo "$1 $2 $3" >>"$OUT/runs.txt"; }
run_of() { awk -v p="$1" -v l="$2" '$1==p && $2==l {print $3}' "$OUT/runs.txt" | tail -1; }

cluster() { # MODE-ENV...: a fresh cluster in that mode, the image imported
  "$ADDON/teardown.sh" >>"$OUT/teardown.log" 2>&1 || true
  env "$@" "$ADDON/setup.sh" >"$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; fail "setup.sh $*"; }
  eval "$("$K8SLAB" env)"
  "$K8SLAB" import "$OUT/cnibench-image.tar" >/dev/null 2>&1 || fail "import"
}

if [ -z "${TABLES_ONLY:-}" ]; then
  trap '"$ADDON/teardown.sh" >>"$OUT/teardown.log" 2>&1 || true' EXIT
  build_image "$OUT/cnibench-image.tar"

  if has lab; then
    for x in cilium-model cilium-kpr-model; do
      [ -n "$(run_of lab $x)" ] && continue
      step "lab: $x (load $(load))"
      prof=""; [ $x = cilium-model ] && prof=--profile
      locked "$BIN" run "$ROOT/experiments/$x.yaml" $prof --format none >"$OUT/lab-$x.txt" 2>"$OUT/lab-$x.log" || { tail -3 "$OUT/lab-$x.log"; fail "lab $x"; }
      record lab $x "$("$BIN" report last --format json | jq -r '.runs[0].name')"
    done
  fi

  if has tunnel; then
    # A–B–A–C–A: B and C each between two runs of A, minutes apart.
    seq=(native:1 vxlan:1 native:2 bpfhost:1 native:3)
    for s in "${seq[@]}"; do
      m=${s%:*}; label="$m-$((${s#*:}))"
      [ -n "$(run_of tunnel "$label")" ] && continue
      case $m in
        native) envs=(MODE=native KPR=true KUBE_PROXY_MODE=none) ;;
        vxlan) envs=(MODE=vxlan KPR=true KUBE_PROXY_MODE=none) ;;
        bpfhost) envs=(MODE=native KPR=true KUBE_PROXY_MODE=none EXTRA=--enable-bpf-masquerade=true) ;;
      esac
      step "tunnel $label: ${envs[*]}"
      cluster "${envs[@]}"
      step "tunnel $label: k8s run (load $(load))"
      locked "$BIN" k8s run --image "$REF" --image-pull-policy Never --scenarios pod-cross-node \
        --test tcp_lat,tcp_crr,tcp_bw --msg-size 1,1K,4K,64K --duration 2s --warmup 500ms --repeats "$REPEATS" \
        --profile --agent-cpu --inspect-datapath --json >"$OUT/tunnel-$label.json" 2>"$OUT/tunnel-$label.log" ||
        { tail -3 "$OUT/tunnel-$label.log"; fail "tunnel $label"; }
      record tunnel "$label" "$(run_name "$OUT/tunnel-$label.json")"
      grep -E "^probed" "$OUT/tunnel-$label.log"
    done
  fi

  if has services; then
    # kube-proxy iptables at 0, 1,000, 10,000; the replacement at the same
    # N; kube-proxy iptables again at 10,000 (A–B–A); then nftables.
    seq=(iptables:0 iptables:1000 iptables:10000 kpr:0 kpr:1000 kpr:10000 iptables:10000b nftables:0 nftables:1000 nftables:10000)
    prev=""
    for s in "${seq[@]}"; do
      m=${s%:*}; n=${s#*:}; label="$m-$n"; n=${n%b}
      [ -n "$(run_of services "$label")" ] && { prev=$m; continue; }
      case $m in
        iptables) envs=(MODE=native KPR=false KUBE_PROXY_MODE=iptables) ;;
        nftables) envs=(MODE=native KPR=false KUBE_PROXY_MODE=nftables) ;;
        kpr) envs=(MODE=native KPR=true KUBE_PROXY_MODE=none) ;;
      esac
      if [ "$m" != "$prev" ] || [ "$label" = iptables-10000b ]; then
        step "services $label: ${envs[*]}"
        cluster "${envs[@]}"
      fi
      prev=$m
      step "services $label: k8s run (load $(load))"
      locked "$BIN" k8s run --image "$REF" --image-pull-policy Never --scenarios pod-cross-node,service --services "$n" \
        --test tcp_crr,tcp_lat --msg-size 1 --duration 1s --warmup 300ms --repeats "$REPEATS" --settle-idle 70 \
        --agent-cpu --inspect-datapath --json >"$OUT/services-$label.json" 2>"$OUT/services-$label.log" ||
        { tail -3 "$OUT/services-$label.log"; fail "services $label"; }
      record services "$label" "$(run_name "$OUT/services-$label.json")"
      grep -E "^probed|filler services: .* created|ClusterIP" "$OUT/services-$label.log" || true
    done
  fi
fi

step "tables"
# hl A@ARM-or-run B@ARM-or-run TEST SIZE METRIC: B/A as cnibench compare
# estimates it — Hodges–Lehmann ratio, its ~90% interval, Mann–Whitney p.
hl() {
  "$BIN" compare "$1" "$2" --format json 2>/dev/null | jq -r --arg t "$3" --argjson z "$4" --arg m "$5" \
    '[.rows[] | select(.test == $t and .msg_size_bytes == $z and .metric == $m)][0]
     | [.equivalence.ratio, .equivalence.ratio_ci.low, .equivalence.ratio_ci.high, .p, .a.median, .b.median] | map(. // "nan") | @tsv' |
    awk -F'\t' -v OFS='\t' '$4 != "nan" { $4 = sprintf("%.2g", $4) } 1' # p to two digits
}
# fmt_ratio R LO HI
fmt_ratio() { awk -v r="$1" -v l="$2" -v h="$3" 'BEGIN { if (r == "nan") print "—"; else if (l == "nan") printf "%.2f", r; else printf "%.2f [%.2f, %.2f]", r, l, h }'; }
# agree LAB LO HI CIL LO HI: the model/Cilium ratio and whether it is within
# 15 % — "yes"/"no" when the conservative interval [lab lo/cil hi, lab
# hi/cil lo] (two ~90 % intervals: ≥ 80 % jointly) decides it, else
# "too wide to tell (medians: …)".
agree() {
  awk -v l="$1" -v ll="$2" -v lh="$3" -v c="$4" -v cl="$5" -v ch="$6" 'BEGIN {
    if (l == "nan" || c == "nan") { print "— | —"; exit }
    q = l / c; med = (q >= 0.85 && q <= 1.15) ? "within" : "outside"
    if (ll == "nan" || cl == "nan") { printf "%.2f | no interval (medians %s 15 %%)\n", q, med; exit }
    lo = ll / ch; hi = lh / cl
    if (lo >= 0.85 && hi <= 1.15) v = "yes"
    else if (hi < 0.85 || lo > 1.15) v = "no"
    else v = "too wide to tell (medians " med " 15 %)"
    printf "%.2f [%.2f, %.2f] | %s\n", q, lo, hi, v }'
}
T=$OUT/tables.md
: >"$T"
LAB=$(run_of lab cilium-model)
KLAB=$(run_of lab cilium-kpr-model)
if [ -n "$LAB" ] && [ -n "$(run_of tunnel native-1)" ]; then
  for pair in "vxlan:vxlan:native-2" "bpfhost:native-fastpath:native-3"; do
    IFS=: read -r b larm a2 <<<"$pair"
    A1=$(run_of tunnel "native-$([ "$b" = vxlan ] && echo 1 || echo 2)"); A2=$(run_of tunnel "$a2"); B=$(run_of tunnel "$b-1")
    [ -n "$A1" ] && [ -n "$A2" ] && [ -n "$B" ] || continue
    {
      echo "#### Cilium $b against native routing (A–B–A: $A1, $B, $A2), and the lab's $larm against native ($LAB)"
      echo
      echo "| test | size | Cilium B/A₁ [90 % CI] (p) | Cilium B/A₂ [90 % CI] (p) | drift A₂/A₁ (p) | lab model [90 % CI] | model / Cilium (vs A₁) [≥80 % CI] | within 15 %? |"
      echo "|---|---|---|---|---|---|---|---|"
      for t in tcp_lat tcp_crr tcp_bw; do
        case $t in tcp_lat) m=one_way_mean_us ;; tcp_crr) m=transactions_per_sec ;; tcp_bw) m=receiver_mbps ;; esac
        for z in 1 1024 4096 65536; do
          IFS=$'\t' read -r r1 l1 h1 p1 _ <<<"$(hl "$A1" "$B" $t $z $m)"
          IFS=$'\t' read -r r2 l2 h2 p2 _ <<<"$(hl "$A2" "$B" $t $z $m)"
          IFS=$'\t' read -r rd _ _ pd _ <<<"$(hl "$A1" "$A2" $t $z $m)"
          IFS=$'\t' read -r rl ll lh _ <<<"$(hl "$LAB@native" "$LAB@$larm" $t $z $m)"
          echo "| $t | $z | $(fmt_ratio "$r1" "$l1" "$h1") (p=$p1) | $(fmt_ratio "$r2" "$l2" "$h2") (p=$p2) | $(fmt_ratio "$rd" nan nan) (p=$pd) | $(fmt_ratio "$rl" "$ll" "$lh") | $(agree "$rl" "$ll" "$lh" "$r1" "$l1" "$h1") |"
        done
      done
      echo
    } >>"$T"
  done
fi
if [ -n "$KLAB" ] && [ -n "$(run_of services kpr-10000)" ]; then
  for t in tcp_crr tcp_lat; do
    m=transactions_per_sec; [ $t = tcp_lat ] && m=one_way_mean_us
    {
      echo "#### $t through the Service: Cilium (pod-cross-node's client to a ClusterIP) and the lab's model"
      echo
      echo "| comparison | Cilium runs | Cilium B/A [90 % CI] (p) | lab model (arms of $KLAB) | lab B/A [90 % CI] (p) | model / Cilium [≥80 % CI] | within 15 %? |"
      echo "|---|---|---|---|---|---|---|"
      # row TEXT CILIUM-A CILIUM-B LAB-A LAB-B
      row() {
        local A B ra la ha pa rl ll hl_ pl
        A=$(run_of services "$2"); B=$(run_of services "$3")
        [ -n "$A" ] && [ -n "$B" ] || return 0
        IFS=$'\t' read -r ra la ha pa _ <<<"$(hl "$A@service" "$B@service" $t 1 $m)"
        if [ -n "$4" ]; then
          IFS=$'\t' read -r rl ll hl_ pl _ <<<"$(hl "$KLAB@$4" "$KLAB@$5" $t 1 $m)"
          echo "| $1 | $A → $B | $(fmt_ratio "$ra" "$la" "$ha") (p=$pa) | $5 / $4 | $(fmt_ratio "$rl" "$ll" "$hl_") (p=$pl) | $(agree "$rl" "$ll" "$hl_" "$ra" "$la" "$ha") |"
        else
          echo "| $1 | $A → $B | $(fmt_ratio "$ra" "$la" "$ha") (p=$pa) | — (no model) | — | — | — |"
        fi
      }
      row "kube-proxy iptables, N = 1,000 vs 0" iptables-0 iptables-1000 iptables-1 iptables-1000
      row "kube-proxy iptables, N = 10,000 vs 0" iptables-0 iptables-10000 iptables-1 iptables-10000
      row "kube-proxy nftables, N = 1,000 vs 0" nftables-0 nftables-1000 nftables-1 nftables-1000
      row "kube-proxy nftables, N = 10,000 vs 0" nftables-0 nftables-10000 nftables-1 nftables-10000
      row "replacement, N = 1,000 vs 0" kpr-0 kpr-1000 "" ""
      row "replacement, N = 10,000 vs 0" kpr-0 kpr-10000 "" ""
      row "replacement vs kube-proxy iptables at N = 0" iptables-0 kpr-0 iptables-1 direct
      row "replacement vs kube-proxy iptables at N = 10,000 (A₁)" iptables-10000 kpr-10000 iptables-10000 direct
      row "replacement vs kube-proxy iptables at N = 10,000 (A₂)" iptables-10000b kpr-10000 iptables-10000 direct
      row "drift: kube-proxy iptables at N = 10,000, A₂ vs A₁" iptables-10000 iptables-10000b "" ""
      echo
    } >>"$T"
  done
fi
# Seed 004's own columns for each tunnel run: bitrate, sender and receiver
# CPU, latency and connection rate (median ±95 % CI half-width, n).
TUN=$(awk '$1=="tunnel" {print $3}' "$OUT/runs.txt" | tr '\n' ' ')
if [ -n "$TUN" ]; then
  # shellcheck disable=SC2086
  "$BIN" report $TUN --format csv >"$OUT/tunnel.csv"
  {
    echo "#### Seed 004's columns per run (pod-cross-node; median ±95 % CI half-width over each run's repeats)"
    echo
    echo "| run | mode | tcp_bw 64 KiB (Gb/s) | sender CPU (%) | receiver CPU (%) | tcp_bw 1 KiB (Gb/s) | sender CPU (%) | receiver CPU (%) | tcp_lat 1 B (µs) | tcp_lat 4 KiB (µs) | tcp_crr 1 B (/s) |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    while read -r part label name; do
      [ "$part" = tunnel ] || continue
      awk -F'"' 'BEGIN{OFS=""} {for(i=2;i<=NF;i+=2) gsub(",",";",$i); print}' "$OUT/tunnel.csv" | awk -F, -v run="$name" -v label="$label" '
        $2 == run && $5 == "pod-cross-node" { v[$6 " " $7 " " $8] = sprintf("%.3g ±%.2g", $10, ($12 - $11) / 2) }
        END {
          printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", run, label,
            gb(v["tcp_bw 65536 receiver_mbps"]), v["tcp_bw 65536 client_cpu_pct"], v["tcp_bw 65536 server_cpu_pct"],
            gb(v["tcp_bw 1024 receiver_mbps"]), v["tcp_bw 1024 client_cpu_pct"], v["tcp_bw 1024 server_cpu_pct"],
            v["tcp_lat 1 one_way_mean_us"], v["tcp_lat 4096 one_way_mean_us"], v["tcp_crr 1 transactions_per_sec"] }
        function gb(s,   a) { split(s, a, " ±"); return sprintf("%.3g ±%.2g", a[1] / 1000, a[2] / 1000) }'
    done <"$OUT/runs.txt"
    echo
    echo "Where the difference goes (cnibench compare, CPU by stage of B against A):"
    echo
    echo '```'
    for pair in "native-1 vxlan-1" "native-2 bpfhost-1"; do
      read -r a b <<<"$pair"
      A=$(run_of tunnel "$a"); B=$(run_of tunnel "$b")
      [ -n "$A" ] && [ -n "$B" ] || continue
      echo "# $a ($A) → $b ($B)"
      "$BIN" compare "$A" "$B" 2>/dev/null | sed -n '/CPU by datapath stage/,$p' || true
    done
    echo '```'
    echo
  } >>"$T"
fi
cat "$T"
step "done: $OUT (runs.txt lists the stored runs)"
