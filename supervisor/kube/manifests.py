"""What the operator creates for a cluster, as plain API dicts. Pure: no I/O, no clock.

Per cluster: a headless peer Service (member DNS names), a client Service, a
PodDisruptionBudget and, with TLS on, a Secret of certificates (tls.py). Per member: a
PersistentVolumeClaim (its data) and a Pod (its process). Members are bare Pods rather than a
StatefulSet so the cluster actor orders every membership change with the pod lifecycle itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from attrs import frozen

from actors.model import (
    API_GROUP,
    API_VERSION,
    KIND,
    ClusterRef,
    ClusterSpec,
    IssuerRef,
    MemberConfig,
    MemberLaunch,
    MemberUrls,
)
from supervisor.etcd.member_settings import config_fingerprint, member_settings
from supervisor.kube.image_layout import etcd_security, image_layout, pod_security, volume_owner
from supervisor.kube.pod_template import merge_member_pod
from supervisor.kube.voter_budget import NOT_VOTER, VOTER, VOTER_LABEL

Obj = dict[str, Any]

CLIENT_PORT = 2379
PEER_PORT = 2380
METRICS_PORT = 2381  # plain HTTP even with TLS on: Prometheus and the readiness probe use it

MANAGED_BY = "etcd-supervisor"
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_MEMBER = "etcd.io/member"
# Carried by member pods and by warm pods (the members to come): the peer Service publishes the
# DNS records of the pods that carry it (peer_service says why warm pods are among them).
LABEL_PEER_RECORD = "etcd.io/peer-record"
COMPONENT_MEMBER = "member"

ANNOTATION_PEER_URL = "etcd.io/peer-url"
ANNOTATION_CLIENT_URL = "etcd.io/client-url"
# Pods run with restartPolicy Never, so each crash yields a new pod; the count of crashes in a
# row travels from pod to pod here, and is read back after an operator restart.
ANNOTATION_FAILURES = "etcd.io/consecutive-failures"
# The member configuration the pod was made for (member_config().fingerprint): a pod whose
# fingerprint differs from the spec's is recreated on its claim, one member at a time.
ANNOTATION_CONFIG = "etcd.io/member-config"
# The trust digest of the CA material in the TLS Secret when the pod was made (pki.trust_digest):
# a CA rotation restarts the pods whose digest is not the Secret's (actors/ca_rotation.py).
ANNOTATION_TRUST = "etcd.io/trust"
# On a seed's claim while a backup is restored into it (supervisor/kube/snapshots.py): its data
# is not there until the mark is gone, even if the operator died half-way.
ANNOTATION_RESTORING = "etcd.io/restoring"
# Kubernetes' own: the container kubectl exec and logs pick when none is named.
ANNOTATION_DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"

# Held on the EtcdCluster until the member volumes are dealt with per the reclaim policy.
FINALIZER = "etcd.io/member-volumes"

# Selects every object this operator manages (watches use it).
MANAGED_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
MEMBER_SELECTOR = f"{MANAGED_SELECTOR},{LABEL_COMPONENT}={COMPONENT_MEMBER}"

TLS_DIR = "/etc/etcd/tls"
# Keys of the <cluster>-tls Secret. Pods mount only the first three; the CA key and the
# operator's client certificate stay out of the etcd containers.
TLS_CA_CERT = "ca.crt"
TLS_CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
TLS_CLIENT_CERT = "client.crt"
TLS_CLIENT_KEY = "client.key"

# Kubernetes' default DNS domain; clusters set up otherwise pass `run --cluster-domain`.
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
_DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")

NETSHOOT_IMAGE = "nicolaka/netshoot:v0.13"


@frozen
class Owner:
    """The EtcdCluster that owns every object built here (its uid goes in ownerReferences)."""

    ref: ClusterRef
    uid: str


# --- names ------------------------------------------------------------------------------------


def peer_service_name(ref: ClusterRef) -> str:
    return f"{ref.name}-peer"


def client_service_name(ref: ClusterRef) -> str:
    return f"{ref.name}-client"


def disruption_budget_name(ref: ClusterRef) -> str:
    return ref.name


def tls_secret_name(ref: ClusterRef) -> str:
    return f"{ref.name}-tls"


def volume_claim_name(member: str) -> str:
    return f"{member}-data"


def normalize_cluster_domain(domain: str) -> str:
    """The cluster's DNS domain in canonical form (lower case, no trailing dot), or ValueError."""
    out = domain.strip().lower().rstrip(".")
    if not out or len(out) > 253 or not all(_DNS_LABEL.fullmatch(label) for label in out.split(".")):
        raise ValueError(f"not a DNS domain: {domain!r}")
    return out


def peer_domain(ref: ClusterRef, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN) -> str:
    """The fully qualified domain of the headless peer Service; each member is one label under it."""
    return f"{peer_service_name(ref)}.{ref.namespace}.svc.{cluster_domain}"


def member_host(ref: ClusterRef, member: str, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN) -> str:
    """The member's stable DNS name, served by the headless peer Service.

    Fully qualified on purpose: the short `<member>.<peer>.<ns>.svc` resolves only through a
    pod's resolv.conf search path, and the operator must also reach members from outside the
    cluster (a laptop pointed at kube-dns, see deploy/kind/laptop-access.sh). These names end
    up in etcd's membership and in the member's annotations, so they never change for a member.
    """
    return f"{member}.{peer_domain(ref, cluster_domain)}"


def member_urls(
    ref: ClusterRef, member: str, *, tls: bool, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
) -> MemberUrls:
    scheme = "https" if tls else "http"
    host = member_host(ref, member, cluster_domain)
    return MemberUrls(
        peer_url=f"{scheme}://{host}:{PEER_PORT}", client_url=f"{scheme}://{host}:{CLIENT_PORT}"
    )


def client_service_hosts(ref: ClusterRef, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN) -> list[str]:
    svc = client_service_name(ref)
    return [
        svc,
        f"{svc}.{ref.namespace}",
        f"{svc}.{ref.namespace}.svc",
        f"{svc}.{ref.namespace}.svc.{cluster_domain}",
    ]


def member_host_patterns(ref: ClusterRef, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN) -> list[str]:
    """Certificate SANs that cover every member, present and future (one DNS label each).

    Both forms: member_host is fully qualified, and the short one is what members created
    before it was (and clients inside the cluster that rely on the search path) use.
    """
    return [f"*.{peer_service_name(ref)}.{ref.namespace}.svc", f"*.{peer_domain(ref, cluster_domain)}"]


# --- labels and metadata -----------------------------------------------------------------------


def cluster_labels(ref: ClusterRef) -> dict[str, str]:
    return {LABEL_NAME: "etcd", LABEL_INSTANCE: ref.name, LABEL_MANAGED_BY: MANAGED_BY}


def member_selector(ref: ClusterRef) -> dict[str, str]:
    return {**cluster_labels(ref), LABEL_COMPONENT: COMPONENT_MEMBER}


def member_labels(ref: ClusterRef, member: str) -> dict[str, str]:
    return {**member_selector(ref), LABEL_MEMBER: member}


def peer_record_selector(ref: ClusterRef) -> dict[str, str]:
    """The pods the peer Service publishes: members and warm pods (peer_service)."""
    return {**cluster_labels(ref), LABEL_PEER_RECORD: "true"}


def label_selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def owner_reference(owner: Owner) -> Obj:
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": KIND,
        "name": owner.ref.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(
    owner: Owner, name: str, labels: Mapping[str, str], annotations: Mapping[str, str] | None = None
) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": owner.ref.namespace,
        "labels": dict(labels),
        "ownerReferences": [owner_reference(owner)],
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def cluster_object_metadata(owner: Owner, name: str) -> Obj:
    """The metadata of a per-cluster object: its name, the cluster's labels, owned by it."""
    return _metadata(owner, name, cluster_labels(owner.ref))


# --- per cluster --------------------------------------------------------------------------------


def peer_service(owner: Owner, *, warm_records: bool = True) -> Obj:
    """Headless: one DNS record per member pod, published before the pod is ready.

    Without publishNotReadyAddresses a new cluster deadlocks: a pod gets its record only once
    ready, and etcd becomes ready only after resolving its peers' records.

    Warm pods (warm_members.py: the pods of the members to come, made ahead under the member's
    name) are published too (`warm_records`): etcd's leader looks a new learner's name up the
    moment the learner is added, and a DNS that keeps denials (NodeLocal DNSCache keeps
    NXDOMAIN 5 s for cluster.local) would otherwise answer that lookup with the denial it
    cached before the member's pod was selected, for every member added. With the warm pod
    published, the name resolves (to that very pod, which becomes the member) before anyone
    asks. False selects member pods only, as operators before the peer-record label did: used
    until every member pod of an existing cluster carries the label (peer_records.py).
    """
    selector = peer_record_selector(owner.ref) if warm_records else member_selector(owner.ref)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, peer_service_name(owner.ref), cluster_labels(owner.ref)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [
                {"name": "peer", "port": PEER_PORT, "targetPort": PEER_PORT, "protocol": "TCP"},
                {"name": "client", "port": CLIENT_PORT, "targetPort": CLIENT_PORT, "protocol": "TCP"},
            ],
        },
    }


def client_service(owner: Owner) -> Obj:
    """Load-balances clients over ready members only."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, client_service_name(owner.ref), cluster_labels(owner.ref)),
        "spec": {
            "type": "ClusterIP",
            "selector": member_selector(owner.ref),
            "ports": [
                {"name": "client", "port": CLIENT_PORT, "targetPort": CLIENT_PORT, "protocol": "TCP"},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT, "protocol": "TCP"},
            ],
        },
    }


def disruption_budget(owner: Owner, min_available: int | None) -> Obj:
    """Voluntary disruptions (drains, evictions) never cost the quorum of voting members.

    Only pods labelled as voters are selected, and minAvailable of them must stay: the quorum
    of the voting membership, kept by the operator as the membership changes
    (supervisor/kube/voter_budget.py says why no eviction it admits costs quorum, operator
    running or not). Learners and pods not yet members are not counted, so a learner Ready
    never stands in for a voter. Unknown membership (None: the operator has not read it yet)
    admits nothing until it is known. A one-member cluster admits no eviction: its only voter
    is its quorum.
    """
    selector = {**member_selector(owner.ref), VOTER_LABEL: VOTER}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(owner, disruption_budget_name(owner.ref), cluster_labels(owner.ref)),
        "spec": {
            "minAvailable": "100%" if min_available is None else min_available,
            "selector": {"matchLabels": selector},
        },
    }


def user_certificate_secret(owner: Owner, name: str, data_b64: Mapping[str, str]) -> Obj:
    """An etcd user's client certificate (spec.security.auth.users[].clientCertSecret)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": _metadata(owner, name, cluster_labels(owner.ref)),
        "data": dict(data_b64),
    }


def tls_secret(owner: Owner, data_b64: Mapping[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _metadata(owner, tls_secret_name(owner.ref), cluster_labels(owner.ref)),
        "data": dict(data_b64),
    }


# --- per member ---------------------------------------------------------------------------------


def member_volume_claim(owner: Owner, spec: ClusterSpec, member: str, urls: MemberUrls) -> Obj:
    # The URLs ride on the claim, which outlives pods, so a member's addresses are read back
    # from the API server even while it has no pod.
    annotations = {ANNOTATION_PEER_URL: urls.peer_url, ANNOTATION_CLIENT_URL: urls.client_url}
    claim_spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": spec.storage.size}},
    }
    if spec.storage.storage_class_name:
        claim_spec["storageClassName"] = spec.storage.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(
            owner, volume_claim_name(member), member_labels(owner.ref, member), annotations
        ),
        "spec": claim_spec,
    }


def _etcd_settings(launch: MemberLaunch, *, data_dir: str, token: str) -> list[tuple[str, str]]:
    """etcd's configuration as (flag name, value) pairs; flags or ETCD_* variables render them."""
    scheme = "https" if launch.spec.tls_enabled else "http"
    settings = [
        ("name", launch.name),
        ("data-dir", data_dir),
        ("listen-peer-urls", f"{scheme}://0.0.0.0:{PEER_PORT}"),
        ("listen-client-urls", f"{scheme}://0.0.0.0:{CLIENT_PORT}"),
        ("listen-metrics-urls", f"http://0.0.0.0:{METRICS_PORT}"),
        ("advertise-client-urls", launch.urls.client_url),
        ("initial-advertise-peer-urls", launch.urls.peer_url),
        ("initial-cluster", launch.initial_cluster_flag()),
        ("initial-cluster-state", launch.initial_cluster_state),
        ("initial-cluster-token", token),
        *member_settings(launch.spec),
    ]
    if launch.force_new_cluster:
        # Quorum-loss recovery. Pods run with restartPolicy Never: this pod starts once with
        # it, and any later start is a new pod from a launch without it.
        settings.append(("force-new-cluster", "true"))
    if launch.spec.tls_enabled:
        ca, cert, key = f"{TLS_DIR}/{TLS_CA_CERT}", f"{TLS_DIR}/{TLS_CERT}", f"{TLS_DIR}/{TLS_KEY}"
        # Generated material has one member certificate for both listeners; a user's has two.
        peer_cert, peer_key = tls_peer_pair(launch.spec)
        settings += [
            ("cert-file", cert),
            ("key-file", key),
            ("trusted-ca-file", ca),
            ("client-cert-auth", "true"),
            ("peer-cert-file", peer_cert),
            ("peer-key-file", peer_key),
            ("peer-trusted-ca-file", ca),
            ("peer-client-cert-auth", "true"),
            # etcd also checks a connecting peer's certificate SANs against the peer's source
            # address; a pod's IP is unknown until it runs, and the wildcard names match it only
            # once a reverse lookup of that IP returns the member's name, after the headless
            # Service's endpoints reach cluster DNS. Until then every new member's first peer
            # connection was refused and its pod crashed and was recreated, for minutes. The
            # peer CA check stays: only certificates of this cluster's own CA get in.
            (peer_skip_san_flag(launch.spec.version), "true"),
        ]
    return settings


def peer_skip_san_flag(version: str) -> str:
    """etcd 3.6 renamed the flag (3.7 drops the old name); 3.4 and 3.5 know only the old one."""
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return "experimental-peer-skip-client-san-verification"
    if (major, minor) >= (3, 6):
        return "peer-skip-client-san-verification"
    return "experimental-peer-skip-client-san-verification"


def _container_resources(spec: ClusterSpec) -> Obj:
    out: Obj = {}
    if spec.resources.requests:
        out["requests"] = dict(spec.resources.requests)
    if spec.resources.limits:
        out["limits"] = dict(spec.resources.limits)
    return out


def _etcd_container(launch: MemberLaunch, token: str) -> Obj:
    """etcd itself, from the image's own binary with our flags, whatever the image family
    (image_layout.py says why never through an image's entrypoint)."""
    spec = launch.spec
    layout = image_layout(spec)
    ports = [
        {"name": "client", "containerPort": CLIENT_PORT, "protocol": "TCP"},
        {"name": "peer", "containerPort": PEER_PORT, "protocol": "TCP"},
        {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
    ]
    mounts: list[Obj] = [{"name": "data", "mountPath": layout.volume_mount}]
    settings = _etcd_settings(launch, data_dir=layout.data_dir, token=token)
    container: Obj = {
        "name": "etcd",
        "image": spec.image,
        # Never the image's entrypoint; and no ETCD_* environment: etcd reads those as flags
        # and refuses to start when one shadows a flag given on the command line.
        "command": [layout.binary("etcd")],
        "args": [f"--{flag}={value}" for flag, value in settings],
        "ports": ports,
        "volumeMounts": mounts,
        # The log's tail becomes the termination message: the status then says why etcd died.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        # serializable: a learner (which cannot serve linearizable reads) still counts as ready.
        # Probed from the start and every second: the operator takes Ready as the sign that a
        # member serves (before promoting a learner, say), so a slow probe delayed every
        # membership step by up to initialDelaySeconds + periodSeconds (11 s each before).
        # An HTTP probe, not an exec: nothing in the image but etcd is relied on.
        "readinessProbe": {
            "httpGet": {"path": "/health?serializable=true", "port": METRICS_PORT, "scheme": "HTTP"},
            "initialDelaySeconds": 0,
            "periodSeconds": 1,
            "failureThreshold": 3,
        },
    }
    container["securityContext"] = etcd_security(spec)
    # No liveness probe on purpose: killing etcd during a long defragmentation or snapshot
    # would only turn a slow member into a missing one; the cluster actor judges health.
    if spec.tls_enabled:
        mounts.append({"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
    resources = _container_resources(spec)
    if resources:
        container["resources"] = resources
    return container


OPERATOR_UID = 65532  # the operator image's user (deploy/Dockerfile)


def operator_image_security() -> Obj:
    """The securityContext of a container of the operator's own image inside a member's or a
    snapshot's pod: its non-root user, nothing more than it needs."""
    return {
        "runAsNonRoot": True,
        "runAsUser": OPERATOR_UID,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def debug_container() -> Obj:
    return {
        "name": "netshoot",
        "image": NETSHOOT_IMAGE,
        "command": ["sleep", "infinity"],
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"cpu": "100m", "memory": "128Mi"},
        },
    }


def cluster_token(owner: Owner) -> str:
    # Unique per incarnation of the resource, so members of a deleted and re-created cluster
    # of the same name can never bootstrap into each other.
    return f"{owner.ref.name}-{owner.uid}" if owner.uid else owner.ref.name


def member_config(spec: ClusterSpec) -> MemberConfig:
    """A member pod's configuration: the etcd settings, the image (repository and tag), the
    container's resources and the pod template, which a pod cannot change in place (most of it):
    a change rolls the members."""
    resources = _container_resources(spec)
    # Each only when set: a cluster without resources or podTemplate keeps the fingerprint its
    # pods were made with (an operator upgrade restarts nothing).
    parts = [spec.image, *([json.dumps(resources, sort_keys=True)] if resources else [])]
    if spec.pod_template.is_set:
        parts.append(json.dumps(attrs.asdict(spec.pod_template), sort_keys=True))
    return MemberConfig(config_fingerprint(spec, *parts))


# A user's certificates (secretRef) also have a peer pair, copied under these keys (byo_tls.py).
TLS_PEER_CERT = "peer.crt"
TLS_PEER_KEY = "peer.key"


def tls_source(spec: ClusterSpec) -> str | IssuerRef | None:
    """Where a cluster's certificates come from when the operator does not generate them: the
    user's Secret (secretRef) or cert-manager (issuerRef, issued_tls.py); both are copied into
    the cluster's TLS Secret the same way (byo_tls.py)."""
    return spec.tls_secret or spec.tls_issuer


def tls_peer_pair(spec: ClusterSpec) -> tuple[str, str]:
    """The mounted files of the peer listener's pair: the member pair, or a brought peer pair."""
    cert, key = (TLS_PEER_CERT, TLS_PEER_KEY) if tls_source(spec) else (TLS_CERT, TLS_KEY)
    return f"{TLS_DIR}/{cert}", f"{TLS_DIR}/{key}"


def tls_volume(ref: ClusterRef, spec: ClusterSpec, *, mode: int = 0o400) -> Obj:
    """The cluster's CA certificate and member key pair(s) (never a CA key, never the operator's
    client pair), mounted at TLS_DIR."""
    keys = [TLS_CA_CERT, TLS_CERT, TLS_KEY]
    if tls_source(spec):
        keys += [TLS_PEER_CERT, TLS_PEER_KEY]
    return {
        "name": "tls",
        "secret": {
            "secretName": tls_secret_name(ref),
            "defaultMode": mode,
            "items": [{"key": k, "path": k} for k in keys],
        },
    }


# The only names etcd resolves are its peers' and its own, all full names (member_urls):
# ndots:2 looks them up as they are, not after three misses down the search list (eight
# queries instead of two); timeout:1 retries a query a busy node lost after 1 s, not the
# resolver's default 5 s. A joining member fetches the membership from its peers once, within
# about 2 s (the peer dial timeout, DNS included): one lost answer used to outlast that, and
# the learner exited with "discovery failed" (about once in 70 formations on the built-in
# node, where the log's "lookup ...: i/o timeout" showed it).
MEMBER_DNS_CONFIG: Obj = {
    "options": [
        {"name": "ndots", "value": "2"},
        {"name": "timeout", "value": "1"},
        {"name": "attempts", "value": "3"},
    ]
}


def member_pod(
    owner: Owner,
    launch: MemberLaunch,
    *,
    consecutive_failures: int = 0,
    voter: bool = False,
    trust: str = "",
    avoid_nodes: Sequence[str] = (),
) -> Obj:
    # `avoid_nodes`: nodes the pod must not be placed on (lately lost: runtime.py).
    # `voter`: the member votes (the disruption budget counts its pod); a learner's, or a
    # member's whose role is not known yet, is "false", never counted for a voter.
    ref, spec = launch.cluster, launch.spec
    volumes: list[Obj] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": volume_claim_name(launch.name)}}
    ]
    if spec.tls_enabled:
        volumes.append(tls_volume(ref, spec))
    containers = [_etcd_container(launch, cluster_token(owner))]
    if spec.debug_sidecar:
        containers.append(debug_container())
    pod_spec: Obj = {
        "hostname": launch.name,
        "subdomain": peer_service_name(ref),
        # The cluster actor restarts members, in order with membership changes, and counts
        # crashes; the kubelet restarting them behind its back would hide both.
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        # etcd never calls the Kubernetes API: no token in its pods (one volume less for the
        # kubelet to mount before the member can start). No Service environment variables
        # either: etcd reads ETCD_* variables as flags, and a Service named "etcd" makes some.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "dnsConfig": MEMBER_DNS_CONFIG,
        "containers": containers,
        "volumes": volumes,
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": member_selector(ref)},
                        },
                    }
                ]
            }
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": member_selector(ref)},
            }
        ],
    }
    owner_container = volume_owner(spec, "data")
    if owner_container:
        pod_spec["initContainers"] = [owner_container]
    pod_spec["securityContext"] = pod_security(spec)
    annotations = {
        ANNOTATION_PEER_URL: launch.urls.peer_url,
        ANNOTATION_CLIENT_URL: launch.urls.client_url,
        ANNOTATION_FAILURES: str(consecutive_failures),
        ANNOTATION_CONFIG: member_config(spec).fingerprint,
    }
    if trust:
        annotations[ANNOTATION_TRUST] = trust
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _metadata(
            owner,
            launch.name,
            {
                **member_labels(ref, launch.name),
                LABEL_PEER_RECORD: "true",
                VOTER_LABEL: VOTER if voter else NOT_VOTER,
            },
            annotations,
        ),
        "spec": pod_spec,
    }
    merged = merge_member_pod(pod, spec.pod_template)
    if avoid_nodes:
        keep_off(merged["spec"], avoid_nodes)
    return merged


def keep_off(pod_spec: Obj, nodes: Sequence[str]) -> None:
    """Keep the pod off `nodes` (by Node name): the condition is added to every required node
    selector term a pod template gave (terms are alternatives, so each must carry it)."""
    off = {"key": "metadata.name", "operator": "NotIn", "values": sorted(nodes)}
    node_affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", []) or [{}]
    for term in terms:
        term["matchFields"] = [*term.get("matchFields", []), off]
    required["nodeSelectorTerms"] = terms


def etcd_container_status(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """The kubelet's report on a member pod's etcd container; {} before it has one."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == "etcd":
            return status  # type: ignore[no-any-return]
    return {}


def etcd_state(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The etcd container's state of that kind ("waiting", "running", "terminated"); {} if
    it is in another."""
    return (etcd_container_status(pod).get("state") or {}).get(kind) or {}


def etcd_finished(pod: Mapping[str, Any]) -> bool:
    """Whether a member pod's etcd has exited for good (restartPolicy Never). The pod's phase
    alone does not say so when another container still runs (a warm pod's, the debug one)."""
    if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
        return True
    return "terminated" in (etcd_container_status(pod).get("state") or {})


# --- API paths -----------------------------------------------------------------------------------


def cluster_path(ref: ClusterRef) -> str:
    return f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{ref.namespace}/etcdclusters/{ref.name}"


def core_path(namespace: str, plural: str, name: str | None = None) -> str:
    base = f"/api/v1/namespaces/{namespace}/{plural}"
    return f"{base}/{name}" if name else base


def pdb_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    return f"{base}/{name}" if name else base
