#!/usr/bin/env bash
# The prometheus-operator CRDs (PodMonitor, ServiceMonitor, PrometheusRule) the chart's and
# deploy/monitoring's objects are checked against on a real kube-apiserver: read from the
# prometheus-operator Go module (example/prometheus-operator-crd/, as its releases ship them),
# fetched once through the Go module proxy into a cache outside the clone. Prints the directory.
set -euo pipefail
version=v0.85.0
out="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/envtest/prometheus-operator-crds-$version"
kinds="podmonitors servicemonitors prometheusrules"
if [ ! -f "$out/.complete" ]; then
  mkdir -p "$out"
  echo "fetching the prometheus-operator $version module for its CRDs into $out (once)" >&2
  # Outside any go.mod: the module is downloaded, not added to one.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  dir=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json \
    "github.com/prometheus-operator/prometheus-operator@$version" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  for kind in $kinds; do
    cp "$dir/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$out/"
  done
  touch "$out/.complete"
fi
echo "$out"
