#!/usr/bin/env bash
# Builds cert-manager's controller (tests/envtest/certmanager/main.go: the Certificate and CA
# issuer controllers of github.com/cert-manager/cert-manager, whose own cmd/controller is a nested
# module the Go module proxy does not serve) into a cache outside the clone, once per pinned
# version, and copies the module's CRDs (deploy/crds/*.yaml: plain YAML, no Helm templating)
# beside it:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/cert-manager/<version>/{cert-manager,crds/}
# Prints the directory. The cold build's wall time is appended to build-times.txt there.
set -euo pipefail
here=$(cd "$(dirname "$0")/certmanager" && pwd)
version=$(awk '$1=="require" && $2=="github.com/cert-manager/cert-manager" {print $3}' "$here/go.mod")
out="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/cert-manager/$version"
mkdir -p "$out"
if [ ! -x "$out/cert-manager" ]; then
  echo "building cert-manager's controller $version into $out (once; ~5 minutes on 2 cores)" >&2
  start=$SECONDS tmp="$out/cert-manager.tmp.$$"
  (cd "$here" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags=-s -o "$tmp" .) >&2
  mv -f "$tmp" "$out/cert-manager"
  echo "cert-manager $((SECONDS - start))s $(date -u +%FT%TZ) $(nproc) cores" >> "$out/build-times.txt"
fi
if [ ! -f "$out/crds/cert-manager.io_certificates.yaml" ]; then
  module=$(cd "$here" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)
  mkdir -p "$out/crds.tmp.$$"
  cp "$module"/deploy/crds/*.yaml "$out/crds.tmp.$$/"
  chmod u+w "$out/crds.tmp.$$"/*.yaml
  rm -rf "$out/crds" && mv "$out/crds.tmp.$$" "$out/crds"
fi
echo "$out"
