#!/usr/bin/env bash
# The iproute2 twin of two cnibench lab topologies, for `make bench-lab`:
# the same namespaces, links, addresses, routes, neighbours and sysctls that
# `cnibench lab up` creates, one `ip` command per step, as a hand-written
# lab script would do it.
#
#   lab-iproute2.sh up   vxlan|bridge2x50 ID     # ID: 4 chars [a-z0-9]
#   lab-iproute2.sh down vxlan|bridge2x50 ID
set -euo pipefail
op=$1 topo=$2 id=$3
P=cnb-$id

ns_list() {
  case $topo in
    vxlan) echo "$P-node1 $P-node2 $P-client $P-server" ;;
    bridge2x50)
      echo "$P-node1 $P-node2"
      for n in 1 2; do for i in $(seq 0 49); do pod_ns "$n" "$i"; done; done ;;
  esac
}
pod_ns() { # node idx -> namespace, named as cnibench names them
  if [ "$1" = 1 ] && [ "$2" = 0 ]; then echo "$P-client"
  elif [ "$1" = 2 ] && [ "$2" = 0 ]; then echo "$P-server"
  else echo "$P-pod$1-$2"; fi
}

down() {
  for ns in $(ns_list); do ip netns del "$ns" 2>/dev/null || true; done
}

netns_add() { ip netns add "$1"; ip -n "$1" link set lo up; }

underlay() { # name mtu
  ip -n "$P-node1" link add "$1" mtu "$2" type veth peer name "$1" netns "$P-node2" mtu "$2"
  ip -n "$P-node1" link set "$1" up
  ip -n "$P-node2" link set "$1" up
}

up_vxlan() {
  for ns in $(ns_list); do netns_add "$ns"; done
  underlay "$P-u" 1500
  for n in 1 2; do
    m=$((3 - n)) node=$P-node$n
    ip -n "$node" addr add 172.31.0.$n/24 dev "$P-u"
    ip netns exec "$node" sysctl -qw net.ipv4.ip_forward=1
    ip -n "$node" link add "$P-vx" mtu 1450 type vxlan id 42 local 172.31.0.$n remote 172.31.0.$m dev "$P-u" dstport 4789
    ip -n "$node" link set "$P-vx" up
    ip -n "$node" addr add 10.245.0.$n/24 dev "$P-vx"
    ip -n "$node" route add 10.244.$m.0/24 via 10.245.0.$m dev "$P-vx"
    pod=$(pod_ns "$n" 0)
    ip -n "$node" link add "$P-h0" mtu 1450 address ee:ee:ee:ee:ee:ee type veth peer name eth0 netns "$pod" mtu 1450
    ip -n "$node" link set "$P-h0" up
    ip -n "$node" route add 10.244.$n.10/32 dev "$P-h0" scope link
    ip -n "$pod" addr add 10.244.$n.10/32 dev eth0
    ip -n "$pod" link set eth0 up
    ip -n "$pod" route add 169.254.1.1 dev eth0 scope link
    ip -n "$pod" route add default via 169.254.1.1 dev eth0
    ip -n "$pod" neigh add 169.254.1.1 lladdr ee:ee:ee:ee:ee:ee dev eth0 nud permanent
  done
}

up_bridge2x50() {
  for ns in $(ns_list); do netns_add "$ns"; done
  for n in 1 2; do
    ip -n "$P-node$n" link add "$P-br" mtu 1500 type bridge
    ip -n "$P-node$n" link set "$P-br" up
  done
  underlay "$P-u" 1500
  for n in 1 2; do
    ip -n "$P-node$n" link set "$P-u" master "$P-br"
    ip -n "$P-node$n" addr add 10.244.$n.1/16 dev "$P-br"
  done
  for n in 1 2; do
    for i in $(seq 0 49); do
      pod=$(pod_ns "$n" "$i")
      ip -n "$P-node$n" link add "$P-h$i" mtu 1500 type veth peer name eth0 netns "$pod" mtu 1500
      ip -n "$P-node$n" link set "$P-h$i" master "$P-br" up
      ip -n "$pod" addr add 10.244.$n.$((10 + i))/16 dev eth0
      ip -n "$pod" link set eth0 up
    done
  done
}

case $op in
  up) trap down ERR; "up_$topo" ;;
  down) down ;;
  *) echo "usage: $0 up|down vxlan|bridge2x50 ID" >&2; exit 2 ;;
esac
