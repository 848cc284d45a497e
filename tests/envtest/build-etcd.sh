#!/usr/bin/env bash
# Builds etcd, etcdctl and etcdutl (3.5+; 3.4 keeps the offline tools in etcdctl) for each
# version in etcd-versions.txt from the etcd Go modules, into a cache outside the clone:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/etcd/<version>/
# once per version (a version whose binaries are present is skipped). With arguments, builds
# only those versions. Prints each version's directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/etcd"

build() {  # version module-version
  local version=$1 modver=$2 out="$cache/$1" work
  local -a targets
  case "$version" in
    # 3.4 is one module whose root package is etcd's main.
    3.4.*) targets=("etcd:go.etcd.io/etcd" "etcdctl:go.etcd.io/etcd/etcdctl") ;;
    # 3.5+: etcd's main package lives in the server module; the tools have modules of their own.
    *) targets=("etcd:go.etcd.io/etcd/server/v3" "etcdctl:go.etcd.io/etcd/etcdctl/v3"
                "etcdutl:go.etcd.io/etcd/etcdutl/v3") ;;
  esac
  local t name pkg missing=0
  for t in "${targets[@]}"; do
    IFS=: read -r name _ <<<"$t"
    [ -x "$out/$name" ] || missing=1
  done
  if [ "$missing" = 0 ]; then echo "$out"; return; fi

  echo "building etcd $version ($modver) into $out (once; a few minutes)" >&2
  # A throwaway module that requires etcd's: its own go.mod replace directives (paths into
  # etcd's repository) do not apply to a dependency, so the published modules are used.
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  mkdir -p "$out"
  (
    cd "$work"
    go mod init etcd-build >/dev/null 2>&1
    for t in "${targets[@]}"; do
      IFS=: read -r _ pkg <<<"$t"
      # By package, not module: go.sum then covers everything that package imports.
      go get "$pkg@$modver" >/dev/null 2>&1 || go get "$pkg@$modver"
    done
    for t in "${targets[@]}"; do
      IFS=: read -r name pkg <<<"$t"
      # Static (no cgo), as etcd's release builds; into a temporary name first so that a
      # concurrent caller never runs a half-written binary.
      CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags=-s -o "$out/$name.tmp.$$" "$pkg"
      mv -f "$out/$name.tmp.$$" "$out/$name"
    done
  ) >&2
  echo "$out"
}

wanted=("$@")
for version in "${wanted[@]}"; do
  if ! awk -v v="$version" '$1 == v {found=1} END {exit !found}' "$here/etcd-versions.txt"; then
    echo "etcd $version is not pinned in $here/etcd-versions.txt" >&2; exit 1
  fi
done
while read -r version modver; do
  case "$version" in ''|'#'*) continue ;; esac
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " =~ " $version " ]]; then continue; fi
  build "$version" "$modver"
done <"$here/etcd-versions.txt"
