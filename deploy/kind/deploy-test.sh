#!/usr/bin/env bash
# Build the image, load it into kind, deploy the operator, create an example cluster and
# prove it serves: Running phase, every member ready, put/get through etcdctl in a member.
#
# Assumes member pods are named after status.members[].name and that `etcdctl` in the
# member container reaches its member without flags (the pod sets ETCDCTL_ENDPOINTS and,
# with TLS, ETCDCTL_CACERT/ETCDCTL_CERT/ETCDCTL_KEY).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need docker kind kubectl

EXAMPLE=${EXAMPLE:-$REPO_ROOT/deploy/examples/etcdcluster-official.yaml}
NAMESPACE=${NAMESPACE:-etcd-e2e}
TIMEOUT=${TIMEOUT:-600s}

log "building $IMAGE"
docker build -f "$REPO_ROOT/deploy/Dockerfile" -t "$IMAGE" "$REPO_ROOT"
log "loading $IMAGE into kind cluster $KIND_CLUSTER"
kind load docker-image "$IMAGE" --name "$KIND_CLUSTER"

log "deploying the operator (kubectl apply -k deploy/)"
# Server-side: the CRD is too large for the last-applied annotation of a client-side apply.
k apply --server-side --force-conflicts -k "$REPO_ROOT/deploy"
k wait --for=condition=Established --timeout=60s crd/etcdclusters.etcd.io
# A freshly loaded image under the same tag: make the pods pick it up.
k -n etcd-supervisor rollout restart deployment/etcd-supervisor
k -n etcd-supervisor rollout status deployment/etcd-supervisor --timeout="$TIMEOUT"

log "creating $(basename "$EXAMPLE") in namespace $NAMESPACE"
k create namespace "$NAMESPACE" --dry-run=client -o yaml | k apply -f -
k -n "$NAMESPACE" apply -f "$EXAMPLE"
name=$(k -n "$NAMESPACE" get -f "$EXAMPLE" -o jsonpath='{.metadata.name}')
size=$(k -n "$NAMESPACE" get etcdcluster "$name" -o jsonpath='{.spec.size}')

log "waiting for etcdcluster/$name to be Running with $size ready members"
if ! k -n "$NAMESPACE" wait "etcdcluster/$name" --for=jsonpath='{.status.phase}'=Running --timeout="$TIMEOUT" ||
   ! k -n "$NAMESPACE" wait "etcdcluster/$name" --for=jsonpath='{.status.readyReplicas}'="$size" --timeout="$TIMEOUT"; then
  log "cluster did not become ready; state for the post-mortem:"
  k -n "$NAMESPACE" get etcdcluster "$name" -o yaml || true
  k -n "$NAMESPACE" get pods,pvc,svc -o wide || true
  k -n "$NAMESPACE" get events --sort-by=.lastTimestamp || true
  k -n etcd-supervisor logs deployment/etcd-supervisor --tail=200 || true
  exit 1
fi
k -n "$NAMESPACE" get etcdcluster "$name"

member=$(k -n "$NAMESPACE" get etcdcluster "$name" -o jsonpath='{.status.members[0].name}')
log "put/get through etcdctl in pod $member"
value="e2e-$(date +%s)"
k -n "$NAMESPACE" exec "$member" -- etcdctl put /e2e/probe "$value" >/dev/null
got=$(k -n "$NAMESPACE" exec "$member" -- etcdctl get /e2e/probe --print-value-only)
if [ "$got" != "$value" ]; then
  echo "error: etcdctl get returned '$got', wanted '$value'" >&2
  exit 1
fi
k -n "$NAMESPACE" exec "$member" -- etcdctl endpoint health --cluster
log "OK: $name serves reads and writes"
