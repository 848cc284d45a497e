#!/usr/bin/env bash
# Installs, in one apt-get run, every Debian package the set-up needs and this machine lacks:
# etcd 3.4 (etcd-server) for the version tests, Prometheus and promtool, and the real node's
# containerd, runc, CNI plugins, busybox-static, iptables, conntrack, iproute2, util-linux and
# ipset (REAL_NODE.md). One run, so `make -j` set-up steps never wait on each other's dpkg lock
# and the package lists are fetched once, not once per step.
#
# Only as root where apt exists; elsewhere it says what is missing and exits 0: each step that
# needs a package then reports it (its tests skip, or fail under CI=true).
set -euo pipefail
missing=()
need() {  # package test...
  local package=$1; shift
  "$@" >/dev/null 2>&1 || missing+=("$package")
}
need etcd-server sh -c '/usr/bin/etcd --version | grep -q "etcd Version: 3.4"'
need prometheus sh -c 'command -v prometheus && command -v promtool'
for pair in containerd:containerd runc:runc ctr:containerd busybox:busybox-static iptables:iptables \
            conntrack:conntrack ip:iproute2 nsenter:util-linux ipset:ipset; do
  need "${pair#*:}" command -v "${pair%%:*}"
done
need containernetworking-plugins test -x /usr/lib/cni/bridge
[ ${#missing[@]} -gt 0 ] || exit 0
readarray -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if ! command -v apt-get >/dev/null || [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages ${missing[*]} (not root or no apt): the steps needing them will say so" >&2
  exit 0
fi
echo "installing Debian packages: ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
