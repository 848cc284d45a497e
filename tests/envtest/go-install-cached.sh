#!/usr/bin/env bash
# `go install MODULE/CMD@VERSION` into a cache outside the clone, once per pinned version:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/<name>/<version>/<name>
# Usage: go-install-cached.sh NAME PACKAGE VERSION. Prints the path of the binary.
set -euo pipefail
name=$1 package=$2 version=$3
out="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/$name/$version"
if [ ! -x "$out/$name" ]; then
  mkdir -p "$out"
  echo "building $name $version into $out (once; a few minutes)" >&2
  # Into a temporary GOBIN first: a concurrent caller never runs a half-written binary.
  tmp=$(mktemp -d "$out/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # `go install module@version` builds with the module's own go.sum, outside any local module.
  GOBIN="$tmp" CGO_ENABLED=0 nice -n 10 go install -trimpath -ldflags=-s "$package@$version" >&2
  mv -f "$tmp/$name" "$out/$name"
fi
echo "$out/$name"
