#!/usr/bin/env bash
# Delete the kind cluster (and everything in it).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need kind
log "deleting kind cluster $KIND_CLUSTER"
kind delete cluster --name "$KIND_CLUSTER"
