#!/usr/bin/env bash
# Create the kind cluster (idempotent: an existing cluster of that name is kept).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need kind docker kubectl

if kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
  log "kind cluster $KIND_CLUSTER exists"
else
  log "creating kind cluster $KIND_CLUSTER ($KIND_NODE_IMAGE)"
  kind create cluster --name "$KIND_CLUSTER" --image "$KIND_NODE_IMAGE" \
    --config "$REPO_ROOT/deploy/kind/kind-config.yaml" --wait 180s
fi
k cluster-info
