#!/usr/bin/env bash
# The end-to-end run: create the kind cluster, deploy and test, and delete the cluster
# afterwards unless KEEP_CLUSTER=1 (kept on failure too when set, for a post-mortem).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

cleanup() {
  if [ "${KEEP_CLUSTER:-0}" != 1 ]; then
    "$here/delete.sh" || true
  fi
}
trap cleanup EXIT

"$here/create.sh"
"$here/deploy-test.sh"
