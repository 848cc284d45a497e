# Shared settings of the kind scripts; sourced, never run.
# shellcheck shell=bash
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KIND_CLUSTER=${KIND_CLUSTER:-etcd-supervisor}
# The node image pins the Kubernetes version; ValidatingAdmissionPolicy v1 needs 1.30+.
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-kindest/node:v1.32.2}
IMAGE=${IMAGE:-etcd-supervisor:dev}
KUBECTL=${KUBECTL:-kubectl}
CONTEXT="kind-${KIND_CLUSTER}"

log() { printf '==> %s\n' "$*" >&2; }

need() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool is required" >&2; exit 1; }
  done
}

# kubectl pinned to the kind cluster's context, whatever the user's current context is.
k() { "$KUBECTL" --context "$CONTEXT" "$@"; }
