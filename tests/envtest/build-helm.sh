#!/usr/bin/env bash
# Builds the helm CLI from the Go module pinned in helm/go.mod (a module of its own, so helm's
# k8s.io dependencies stay independent of the kube-apiserver pins in go.mod) into a cache
# outside the clone, once per version. Prints the path of the helm binary.
# $HELM wins when it names an executable.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${HELM:-}" ]; then
  if [ -x "$HELM" ]; then echo "$HELM"; exit 0; fi
  echo "\$HELM=$HELM is not an executable file" >&2; exit 1
fi
mod="$here/helm"
version=$(awk '$1=="require" && $2=="helm.sh/helm/v3" {print $3}' "$mod/go.mod")
out="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/envtest/helm-$version"
if [ ! -x "$out/helm" ]; then
  mkdir -p "$out"
  echo "building helm $version into $out (once; takes a few minutes)" >&2
  # Stamp what helm's own release build stamps: its version, and the Kubernetes version it
  # assumes without --kube-version (from the client-go it is built with, as helm's Makefile).
  k8s=$(awk '$1=="k8s.io/client-go" {print $2}' "$mod/go.mod")  # v0.MINOR.PATCH
  k8s_minor=$(echo "$k8s" | cut -d. -f2)
  ldflags="-s -X helm.sh/helm/v3/internal/version.version=$version"
  ldflags="$ldflags -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags="$ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
  done
  # Into a temporary name first: a concurrent caller never runs a half-written binary.
  tmp="$out/helm.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$tmp" \
     helm.sh/helm/v3/cmd/helm) >&2
  mv -f "$tmp" "$out/helm"
fi
echo "$out/helm"
