#!/usr/bin/env bash
# Everything the e2e tier's one-node Kubernetes (and the three-node tier's, tests/harness/nodes.py)
# needs besides kube-apiserver/kubectl (build.sh):
#  - Debian packages containerd, runc, containernetworking-plugins, busybox-static, iptables,
#    conntrack, iproute2 and util-linux (ip, nsenter) (installed when missing and we are root
#    with apt);
#  - kubelet, kube-controller-manager, kube-scheduler and kube-proxy, built from the SAME
#    k8s.io/kubernetes as kube-apiserver (go.mod), and CoreDNS (coredns/go.mod), into a cache
#    outside the clone, once per version.
# Prints the directory holding the node binaries (coredns included). Each cold build's wall time
# is appended to $out/build-times.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor"

need_pkgs=()
for pair in containerd:containerd runc:runc ctr:containerd busybox:busybox-static \
            iptables:iptables conntrack:conntrack ip:iproute2 nsenter:util-linux; do
  command -v "${pair%%:*}" >/dev/null || need_pkgs+=("${pair#*:}")
done
[ -x /usr/lib/cni/bridge ] || need_pkgs+=(containernetworking-plugins)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing Debian packages: ${need_pkgs[*]}" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
       apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}") >&2
  else
    echo "missing ${need_pkgs[*]} and cannot apt-get install them (not root or no apt)" >&2; exit 1
  fi
fi

version=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/go.mod")
out="$cache/node/$version"
mkdir -p "$out"
# Stamp the real version, as build.sh does: the node reports it and version skew checks read it.
minor=$(echo "$version" | cut -d. -f2)
ldflags="-s"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

# One binary at a time, niced: other work shares these 2 cores. Into a temporary name first,
# so a concurrent caller never runs a half-written binary.
build() {  # dir name package ldflags
  local dir=$1 name=$2 pkg=$3 flags=$4
  [ -x "$out/$name" ] && return 0
  echo "building $name into $out (once; takes a few minutes)" >&2
  local start=$SECONDS tmp="$out/$name.tmp.$$"
  (cd "$dir" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags="$flags" -o "$tmp" "$pkg") >&2
  mv -f "$tmp" "$out/$name"
  echo "$name $((SECONDS - start))s $(date -u +%FT%TZ) $(nproc) cores" >> "$out/build-times.txt"
}
for cmd in kubelet kube-controller-manager kube-scheduler kube-proxy; do
  build "$here" "$cmd" "k8s.io/kubernetes/cmd/$cmd" "$ldflags"
done
coredns=$(awk '$1=="require" && $2=="github.com/coredns/coredns" {print $3}' "$here/coredns/go.mod")
build "$here/coredns" coredns etcd-supervisor/envtest/coredns \
  "-s -X github.com/coredns/coredns/coremain.GitCommit=$coredns"
echo "$out"
