#!/usr/bin/env bash
# The hand-built twin of cnibench's ovn-overlay preset, for
# scripts/ovn-faithful.sh: the same shape — a central namespace with the
# OVN northbound and southbound ovsdb-servers and ovn-northd; two node
# namespaces, each with its own ovsdb-server, ovs-vswitchd (userspace
# datapath) and ovn-controller; two pods per node on one logical switch
# behind Kube-OVN's router; GENEVE between the nodes over a veth underlay —
# built the way an OVN user builds it by hand: ovsdb-tool, ovs-vsctl,
# ovn-nbctl, ovn-sbctl and ip, with the bridges named as OVN's docs name
# them (br-int, br-ul). Adapted from the recipe that verified this shape on
# this VM for issue 25.
#
#   ovn-handbuilt.sh up ID      # ID: 4 chars [a-z0-9]; prints the ready time
#   ovn-handbuilt.sh down ID
#
# Namespaces are cnb-ID-… and the run directories
# /run/cnibench/ovs/cnb-ID-{central,node1,node2}, where `cnibench lab clean
# --id ID` finds what a killed script left.
set -euo pipefail
op=$1 id=$2
P=cnb-$id
R=${CNIBENCH_STATE_DIR:-/run/cnibench}/ovs
C=$R/$P-central
PODS=("client 1 10.16.1.10" "pod1-1 1 10.16.1.11" "server 2 10.16.2.10" "pod2-1 2 10.16.2.11")
MTU=1400 # Kube-OVN: 1500 - GeneveHeaderLength (100)

mac() { # 10.16.1.10 -> 0a:58:0a:10:01:0a (Kube-OVN's MAC for an address)
  local IFS=.
  # shellcheck disable=SC2086
  set -- $1
  printf '0a:58:%02x:%02x:%02x:%02x' "$1" "$2" "$3" "$4"
}

down() {
  local pids="" ns
  for ns in $(ip netns list | awk -v p="^$P-" '$1 ~ p {print $1}'); do
    pids="$pids $(ip netns pids "$ns" 2>/dev/null || true)"
  done
  # shellcheck disable=SC2086
  [ -n "${pids// /}" ] && kill $pids 2>/dev/null || true
  for _ in $(seq 100); do
    local left=0 p
    for p in $pids; do
      [ -e /proc/$p ] && [ "$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)" != Z ] && left=1
    done
    [ $left = 0 ] && break
    sleep 0.01
  done
  # shellcheck disable=SC2086
  [ -n "${pids// /}" ] && kill -9 $pids 2>/dev/null || true
  for ns in $(ip netns list | awk -v p="^$P-" '$1 ~ p {print $1}'); do ip netns del "$ns"; done
  rm -rf "$R/$P-central" "$R/$P-node1" "$R/$P-node2"
}

startdb() { # ns dir name schema
  ovsdb-tool create "$2/$3.db" "$4"
  OVS_RUNDIR=$2 OVS_LOGDIR=$2 OVS_DBDIR=$2 ip netns exec "$1" ovsdb-server "$2/$3.db" \
    --remote=punix:"$2/$3.sock" --unixctl="$2/$3.ctl" --pidfile="$2/$3.pid" \
    -vconsole:off --log-file="$2/$3.log" --detach --no-chdir
}

up() {
  local t0 n p name node ip
  t0=$(date +%s%N)
  mkdir -p "$C" "$R/$P-node1" "$R/$P-node2"
  for n in central node1 node2 client pod1-1 server pod2-1; do ip netns add "$P-$n"; done
  startdb "$P-central" "$C" nb /usr/share/ovn/ovn-nb.ovsschema
  startdb "$P-central" "$C" sb /usr/share/ovn/ovn-sb.ovsschema
  # ovn-controller 23.03 segfaults on a southbound database without its
  # SB_Global row (before ovn-northd's first run): make it first.
  ovn-sbctl --db=unix:"$C/sb.sock" init
  for n in 1 2; do startdb "$P-node$n" "$R/$P-node$n" db /usr/share/openvswitch/vswitch.ovsschema; done

  ip link add "$P-u" netns "$P-node1" type veth peer name "$P-u" netns "$P-node2"
  for n in 1 2; do ip -n "$P-node$n" link set lo up; ip -n "$P-node$n" link set "$P-u" up; done
  for p in "${PODS[@]}"; do
    # shellcheck disable=SC2086
    set -- $p; name=$1 node=$2 ip=$3
    ip link add "$P-$name" netns "$P-node$node" mtu $MTU type veth peer name eth0 netns "$P-$name" address "$(mac "$ip")" mtu $MTU
    ip netns exec "$P-$name" sh -c "ethtool -K eth0 tx off >/dev/null
      ip link set lo up; ip addr add $ip/16 dev eth0; ip link set eth0 up; ip route add default via 10.16.0.1"
    ip -n "$P-node$node" link set "$P-$name" up
  done

  for n in 1 2; do
    local args=(--no-wait -- init -- set Open_vSwitch .
      external_ids:system-id="$P-node$n" external_ids:hostname="$P-node$n"
      external_ids:ovn-remote=unix:"$C/sb.sock" external_ids:ovn-encap-type=geneve
      external_ids:ovn-encap-ip=172.31.0.$n external_ids:ovn-bridge-datapath-type=netdev
      external_ids:ovn-remote-probe-interval=10000 external_ids:ovn-openflow-probe-interval=180
      -- add-br br-int -- set bridge br-int datapath_type=netdev fail_mode=secure other_config:disable-in-band=true
      -- add-br br-ul -- set bridge br-ul datapath_type=netdev -- add-port br-ul "$P-u")
    for p in "${PODS[@]}"; do
      # shellcheck disable=SC2086
      set -- $p
      [ "$2" = $n ] && args+=(-- add-port br-int "$P-$1" -- set interface "$P-$1" external_ids:iface-id="$1.default")
    done
    ovs-vsctl --db=unix:"$R/$P-node$n/db.sock" "${args[@]}"
  done
  local nb=(-- set NB_Global . options:use_ct_inv_match=false
    -- lr-add ovn-cluster -- ls-add ovn-default
    -- lrp-add ovn-cluster ovn-cluster-ovn-default 0a:58:0a:10:00:01 10.16.0.1/16
    -- lsp-add ovn-default ovn-default-ovn-cluster -- lsp-set-type ovn-default-ovn-cluster router
    -- lsp-set-addresses ovn-default-ovn-cluster router
    -- lsp-set-options ovn-default-ovn-cluster router-port=ovn-cluster-ovn-default)
  for p in "${PODS[@]}"; do
    # shellcheck disable=SC2086
    set -- $p
    nb+=(-- lsp-add ovn-default "$1.default" -- lsp-set-addresses "$1.default" "$(mac "$3") $3")
  done
  ovn-nbctl --db=unix:"$C/nb.sock" init
  ovn-nbctl --db=unix:"$C/nb.sock" "${nb[@]}"

  OVN_RUNDIR=$C OVS_RUNDIR=$C ip netns exec "$P-central" ovn-northd --ovnnb-db=unix:"$C/nb.sock" \
    --ovnsb-db=unix:"$C/sb.sock" --unixctl="$C/ovn-northd.ctl" --pidfile="$C/ovn-northd.pid" \
    -vconsole:off --log-file="$C/ovn-northd.log" --detach --no-chdir
  for n in 1 2; do
    local D=$R/$P-node$n
    OVS_RUNDIR=$D OVS_LOGDIR=$D ip netns exec "$P-node$n" ovs-vswitchd unix:"$D/db.sock" --unixctl="$D/vswitchd.ctl" \
      --pidfile="$D/ovs-vswitchd.pid" -vconsole:off --log-file="$D/ovs-vswitchd.log" --detach --no-chdir
    ip -n "$P-node$n" addr add 172.31.0.$n/24 dev br-ul
    ip -n "$P-node$n" link set br-ul up
    # Only once br-int's OpenFlow socket exists: earlier, ovn-controller
    # waits a second before it tries again.
    while [ ! -S "$D/br-int.mgmt" ]; do sleep 0.002; done
    OVS_RUNDIR=$D OVN_RUNDIR=$D ip netns exec "$P-node$n" ovn-controller unix:"$D/db.sock" \
      --pidfile="$D/ovn-controller.pid" -vconsole:off --log-file="$D/ovn-controller.log" --detach --no-chdir
  done
  ovn-sbctl --db=unix:"$C/sb.sock" --timeout=20 wait-until Chassis "$P-node1" -- wait-until Chassis "$P-node2" >/dev/null
  local w=()
  for p in "${PODS[@]}"; do
    # shellcheck disable=SC2086
    set -- $p
    w+=(-- wait-until Logical_Switch_Port "$1.default" up=true)
  done
  ovn-nbctl --db=unix:"$C/nb.sock" --timeout=20 "${w[@]}"
  ovn-nbctl --db=unix:"$C/nb.sock" --timeout=20 --wait=hv sync
  ip netns exec "$P-client" ping -q -c1 -w5 -i0.02 10.16.2.10 >/dev/null
  echo "ovn-handbuilt $id: ready in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}

case $op in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down ID" >&2; exit 2 ;;
esac
