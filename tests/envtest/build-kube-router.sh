#!/usr/bin/env bash
# Builds kube-router (its NetworkPolicy controller is what enforces the EtcdClusters' policies on
# the three-node tier, tests/harness/netpol.py) from its Go module into a cache outside the
# clone, once per pinned version:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/kube-router/<version>/kube-router
# Prints the path of the binary. Its iptables rules need the ipset tool (Debian's `ipset`).
#
# Why kube-router and not sigs.k8s.io/kube-network-policies: the latter hands packets to
# userspace through nftables' `queue` expression, which needs CONFIG_NFT_QUEUE; kernels without
# it (this machine's has no modules and no nft_queue) refuse its rules. kube-router's iptables
# and ipset rules use only xtables matches (set, physdev, addrtype, conntrack, mark, comment).
set -euo pipefail
version=v2.1.0
if ! command -v ipset >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing Debian ipset (kube-router's NetworkPolicy rules)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ipset >/dev/null) >&2
  else
    echo "ipset missing and cannot be installed here" >&2
    exit 1
  fi
fi
exec "$(dirname "$0")/go-install-cached.sh" kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router "$version"
