#!/usr/bin/env bash
# Builds fake-gcs-server (a GCS-compatible server for the store tests) from its Go module into a
# cache outside the clone, once per pinned version:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/fake-gcs-server/<version>/fake-gcs-server
# Prints the path of the binary.
set -euo pipefail
version=v1.56.1
out="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/fake-gcs-server/$version"
if [ ! -x "$out/fake-gcs-server" ]; then
  mkdir -p "$out"
  echo "building fake-gcs-server $version into $out (once; a few minutes)" >&2
  # Into a temporary GOBIN first: a concurrent caller never runs a half-written binary.
  tmp=$(mktemp -d "$out/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # `go install module@version` builds with the module's own go.sum, outside any local module.
  GOBIN="$tmp" CGO_ENABLED=0 nice -n 10 go install -trimpath -ldflags=-s \
    "github.com/fsouza/fake-gcs-server@$version" >&2
  mv -f "$tmp/fake-gcs-server" "$out/fake-gcs-server"
fi
echo "$out/fake-gcs-server"
