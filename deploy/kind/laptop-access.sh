#!/usr/bin/env bash
# Let a Linux laptop reach the pods and Services of the kind cluster, so that
# `etcd-supervisor run --kubeconfig ~/.kube/config` outside the cluster can dial members at
# the URLs it gives them (<member>.<cluster>-peer.<ns>.svc.cluster.local:2379).
#
# What it does (each command is printed before it runs; sudo is used when not root):
#   - a route for each node's pod CIDR via that node's IP on the docker network `kind`
#     (pods are on a per-node subnet that only the nodes know how to reach);
#   - a route for the Service CIDR via the control-plane node (kube-proxy on any node
#     translates Service IPs, and masquerades traffic from outside the pod CIDR, so replies
#     come back the same way);
#   - systemd-resolved: kube-dns as the DNS server for the routing-only domain ~cluster.local
#     on the docker bridge of the `kind` network, so only cluster names go to kube-dns.
# `--undo` removes exactly what the last run added (recorded in a state file), even after the
# cluster is gone. Running it again is harmless: routes are replaced, the DNS link settings set.
# `--dry-run` only prints the commands. Settings do not survive a reboot or a resolved restart:
# run it again then.
#
# Needs Linux with systemd-resolved (resolvectl, /etc/resolv.conf on its stub), docker, kubectl,
# iproute2. macOS and Windows (Docker Desktop) run containers inside a VM whose container IPs
# the host cannot route to, so none of this can work there: run the operator in-cluster
# instead (`make deploy-test`). Not exercised by the test suite (it has no Docker).
#
# Environment: KIND_CLUSTER (default etcd-supervisor), KIND_NETWORK (default kind),
# CLUSTER_DOMAIN (default cluster.local; must match `etcd-supervisor run --cluster-domain`).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

KIND_NETWORK=${KIND_NETWORK:-kind}
CLUSTER_DOMAIN=${CLUSTER_DOMAIN:-cluster.local}
DEFAULT_SERVICE_CIDR=10.96.0.0/16 # kind's default when the apiserver cannot be asked
STATE_DIR=${XDG_STATE_HOME:-$HOME/.local/state}/etcd-supervisor
STATE_FILE="$STATE_DIR/laptop-access-$KIND_CLUSTER"

usage() { echo "usage: $0 [--undo] [--dry-run]" >&2; exit 2; }
UNDO=0
DRY_RUN=0
for arg in "$@"; do
  case "$arg" in
    --undo) UNDO=1 ;;
    --dry-run) DRY_RUN=1 ;;
    -h | --help) usage ;;
    *) echo "error: unknown argument $arg" >&2; usage ;;
  esac
done

if [[ $(uname -s) != Linux ]]; then
  echo "error: only Linux can route to kind's container IPs; on macOS/Windows run the operator" \
    "in-cluster: make deploy-test" >&2
  exit 1
fi
need ip resolvectl

SUDO=()
if [[ $(id -u) -ne 0 && $DRY_RUN -eq 0 ]]; then
  need sudo
  SUDO=(sudo)
fi

# Print, then run as root (or only print with --dry-run).
run() {
  printf '+ %s\n' "$*" >&2
  if [[ $DRY_RUN -eq 0 ]]; then "${SUDO[@]}" "$@"; fi
}

ipv4_only() { grep -E '^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+/[0-9]+$' || true; }

# The Linux bridge behind a docker network: named in its options, else br-<12 chars of the id>.
bridge_of() {
  local name
  name=$(docker network inspect -f '{{index .Options "com.docker.network.bridge.name"}}' "$1")
  if [[ -z $name ]]; then
    name="br-$(docker network inspect -f '{{.Id}}' "$1" | cut -c1-12)"
  fi
  echo "$name"
}

node_ip() {
  docker inspect -f "{{with index .NetworkSettings.Networks \"$KIND_NETWORK\"}}{{.IPAddress}}{{end}}" "$1"
}

undo() {
  local kind target dev
  if [[ ! -f $STATE_FILE ]]; then
    log "nothing recorded in $STATE_FILE: nothing to undo"
    return
  fi
  # Each line: "route <cidr> <bridge>" or "link <bridge>", as apply() recorded them.
  while read -r kind target dev; do
    case "$kind" in
      route)
        # Only while it is still ours: something else may have routed that prefix since.
        if [[ $(ip route show "$target") == *"dev $dev"* ]]; then run ip route del "$target" dev "$dev"; fi
        ;;
      link)
        # revert drops every per-link DNS setting; the docker bridge has none of its own.
        if ip link show "$target" >/dev/null 2>&1; then run resolvectl revert "$target"; fi
        ;;
    esac
  done <"$STATE_FILE"
  if [[ $DRY_RUN -eq 0 ]]; then rm -f "$STATE_FILE"; fi
  log "undone"
}

apply() {
  need docker kubectl
  local bridge control_plane cp_ip service_cidr dns_ip node cidrs cidr ip nodes existing
  local -a routes=()

  bridge=$(bridge_of "$KIND_NETWORK")
  ip link show "$bridge" >/dev/null || { echo "error: no bridge $bridge for network $KIND_NETWORK" >&2; exit 1; }

  # Pod CIDRs, one (or two, dual-stack) per node; kind names each node after its container.
  # Only IPv4: the node addresses used as gateways are the containers' IPv4 ones.
  nodes=$(k get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDRs[*]}{"\n"}{end}')
  while read -r node cidrs; do
    [[ -n $node ]] || continue
    ip=$(node_ip "$node")
    [[ -n $ip ]] || { echo "error: node $node has no address on network $KIND_NETWORK" >&2; exit 1; }
    for cidr in $(tr ' ,' '\n\n' <<<"$cidrs" | ipv4_only); do
      routes+=("$cidr $ip")
    done
  done <<<"$nodes"
  if [[ ${#routes[@]} -eq 0 ]]; then
    echo "error: the nodes report no IPv4 pod CIDR (.spec.podCIDRs)" >&2
    exit 1
  fi

  control_plane=$(k get nodes -l node-role.kubernetes.io/control-plane -o jsonpath='{.items[0].metadata.name}')
  cp_ip=$(node_ip "$control_plane")
  service_cidr=$(k -n kube-system get pods -l component=kube-apiserver \
    -o jsonpath='{range .items[0].spec.containers[0].command[*]}{@}{"\n"}{end}' 2>/dev/null |
    sed -n 's/^--service-cluster-ip-range=//p' | tr ',' '\n' | ipv4_only | head -n1) || true
  service_cidr=${service_cidr:-$DEFAULT_SERVICE_CIDR}
  routes+=("$service_cidr $cp_ip")

  dns_ip=$(k -n kube-system get service kube-dns -o jsonpath='{.spec.clusterIP}')
  [[ -n $dns_ip ]] || { echo "error: no kube-dns Service IP" >&2; exit 1; }

  if ! grep -qs '^nameserver 127\.0\.0\.53' /etc/resolv.conf; then
    log "warning: /etc/resolv.conf is not systemd-resolved's stub; names may not reach kube-dns"
  fi

  local state=""
  local entry
  for entry in "${routes[@]}"; do
    read -r cidr ip <<<"$entry"
    # Never take over a route to the same prefix that something else owns (a VPN, another
    # kind cluster on its own network); a broader route (a VPN's 10.0.0.0/8) is fine: ours is
    # the longer prefix and wins only for these addresses.
    existing=$(ip route show "$cidr")
    if [[ -n $existing && $existing != *"dev $bridge"* && ${FORCE:-0} != 1 ]]; then
      echo "error: $cidr is already routed ($existing); FORCE=1 replaces it" >&2
      exit 1
    fi
    # replace, not add: a second run (or new node IPs after a docker restart) updates in place.
    run ip route replace "$cidr" via "$ip" dev "$bridge"
    state+="route $cidr $bridge"$'\n'
  done
  run resolvectl dns "$bridge" "$dns_ip"
  # "~": a routing-only domain, so only names under it are sent to kube-dns...
  run resolvectl domain "$bridge" "~$CLUSTER_DOMAIN"
  # ...and this link never becomes the default for every other name.
  run resolvectl default-route "$bridge" false
  state+="link $bridge"$'\n'

  if [[ $DRY_RUN -eq 0 ]]; then
    # Merged with the last run's record, so --undo also drops routes of nodes since removed.
    mkdir -p "$STATE_DIR"
    { cat "$STATE_FILE" 2>/dev/null || true; printf '%s' "$state"; } | sort -u >"$STATE_FILE.new"
    mv "$STATE_FILE.new" "$STATE_FILE"
  fi
  log "pods, Services and *.$CLUSTER_DOMAIN reachable from here; undo with: $0 --undo"
  log "check: resolvectl query kube-dns.kube-system.svc.$CLUSTER_DOMAIN"
}

if [[ $UNDO -eq 1 ]]; then undo; else apply; fi
