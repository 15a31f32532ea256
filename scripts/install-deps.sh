#!/usr/bin/env bash
# Installs the Debian packages cnibench's tests, benchmarks and lab presets use.
# Idempotent: packages already present are not fetched again.
set -euo pipefail
# postgresql: the shared results store's tests start a throwaway cluster from
# its server binaries (internal/pgtest), on a private socket; docker-registry
# and prometheus-pushgateway are the real peers `image push` and `report
# --push` are tested against, on loopback.
# openvswitch-switch-dpdk (the ovs-dpdk preset) installs ovs-vswitchd-dpdk as a
# lower-priority alternative: the host's default ovs-vswitchd stays the plain one.
# DPDK loads its drivers as plugins that Debian only *recommends* (and this
# script installs without recommends): the lab's ports are af_packet vdevs and
# every DPDK mempool needs the ring driver, so both are named here. Without
# them a fresh machine's ovs-dpdk fails with "Error attaching device
# 'net_af_packet0,…' to DPDK".
# ovn-central and ovn-host (the ovn-overlay and ovn-underlay presets): the
# lab runs their programs privately in its own namespaces, with its own
# databases, and never uses the services the packages install.
pkgs=(iproute2 nftables iptables conntrack ethtool qperf iperf3 sockperf openvswitch-switch openvswitch-switch-dpdk
  librte-net-af-packet23 librte-mempool-ring23 ovn-central ovn-host bpftool sqlite3 jq chromium
  postgresql docker-registry prometheus-pushgateway)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: need root to apt-get install: ${missing[*]}" >&2
    exit 1
  fi
  echo "install-deps: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
