#!/usr/bin/env bash
# Builds the porcupine linearizability checker (main.go) into a cache outside the clone,
# once per content of its sources: a changed main.go or go.mod gets a fresh build.
# Prints the path of the binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
digest=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-16)
out="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/linearizability/$digest"
if [ ! -x "$out/linearizability-check" ]; then
  mkdir -p "$out"
  echo "building the linearizability checker into $out (once)" >&2
  # Into a temporary name first: a concurrent caller never runs a half-written binary.
  tmp="$out/linearizability-check.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  (cd "$here" && CGO_ENABLED=0 nice -n 10 go build -trimpath -o "$tmp" .) >&2
  mv -f "$tmp" "$out/linearizability-check"
fi
echo "$out/linearizability-check"
