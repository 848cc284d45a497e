#!/usr/bin/env bash
# Builds kube-apiserver and kubectl from the Go module pinned in go.mod into a cache
# outside the clone, once per version. Prints the directory holding the binaries.
# $KUBEBUILDER_ASSETS (the envtest convention) wins when it already holds kube-apiserver.
# Builds helm too (build-helm.sh; $HELM wins), unless $ENVTEST_SKIP_HELM is set: the harness
# sets it, so that a helm problem does not take kube-apiserver away from every kube test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${ENVTEST_SKIP_HELM:-}" ]; then
  "$here/build-helm.sh" >/dev/null
fi
if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ]; then
  echo "$KUBEBUILDER_ASSETS"; exit 0
fi
version=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/go.mod")
out="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/envtest/$version"
if [ ! -x "$out/kube-apiserver" ] || [ ! -x "$out/kubectl" ]; then
  mkdir -p "$out"
  echo "building kube-apiserver and kubectl $version into $out (once; takes a while)" >&2
  # Stamp the real version: clients and version-gated API behaviour read it.
  minor=$(echo "$version" | cut -d. -f2)
  ldflags="-s"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$out/" \
     k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl) >&2
fi
echo "$out"
