"""What spec.podTemplate may set, and what the supervisor owns of a member pod (data, like
actors/etcd_flags.py): the codec refuses the owned names one by one (actors/codec/pod_template.py),
the CRD's CEL rules list them too (tests/unit/test_pod_template.py keeps the three in step), and
tests/unit/test_pod_template.py checks that every label and annotation supervisor/kube puts on a
pod is listed here."""

from __future__ import annotations

from actors.model import ClusterSpec

# The keys spec.podTemplate takes, as Kubernetes spells them.
METADATA_FIELDS = ("labels", "annotations")
SPEC_FIELDS = (
    "affinity",
    "tolerations",
    "nodeSelector",
    "topologySpreadConstraints",
    "priorityClassName",
    "imagePullSecrets",
    "securityContext",
    "runtimeClassName",
)

# Every label and annotation under this prefix is the supervisor's: which member a pod is, its
# vote, its configuration, its warm-pod and TLS records.
OWNED_PREFIX = "etcd.io/"
# The labels the supervisor selects its pods by (Services, the disruption budget, watches).
OWNED_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by",
)
# kubectl's default container is the etcd one (exec and logs land there).
OWNED_ANNOTATIONS = ("kubectl.kubernetes.io/default-container",)

# Pod spec fields a user might reach for that the supervisor sets itself, with why; any other key
# is an unknown field.
OWNED_SPEC_FIELDS: dict[str, str] = {
    **{
        name: "owned by the supervisor (the etcd container's command, ports and mounts are its own;"
        " use spec.resources, spec.etcdOptions, spec.debug)"
        for name in ("containers", "initContainers", "ephemeralContainers")
    },
    "volumes": "owned by the supervisor (the data and TLS volumes)",
    **{
        name: "owned by the supervisor (members' DNS names and addresses)"
        for name in ("hostname", "subdomain", "setHostnameAsFQDN", "dnsConfig", "dnsPolicy", "hostNetwork")
    },
    "restartPolicy": "owned by the supervisor (it restarts members itself, in order with membership)",
    "nodeName": "owned by the scheduler: use nodeSelector or affinity",
}


def owned_label(key: str) -> bool:
    return key.startswith(OWNED_PREFIX) or key in OWNED_LABELS


def owned_annotation(key: str) -> bool:
    return key.startswith(OWNED_PREFIX) or key in OWNED_ANNOTATIONS


def kubernetes_only(spec: ClusterSpec) -> tuple[str, ...]:
    """The fields of `spec` that are set and apply on Kubernetes only: a runtime without pods
    accepts them and reports them as ignored (MemberConfig.ignored, the condition SpecIgnored)."""
    fields = {
        "spec.podTemplate": spec.pod_template.is_set,
        # A process has no requests or limits, no storage class, no sidecar.
        "spec.resources": bool(spec.resources.requests or spec.resources.limits),
        "spec.storage.storageClassName": spec.storage.storage_class_name is not None,
        "spec.debug.networkSidecar": spec.debug_sidecar,
        # Members on loopback have no network to police: networkPolicy (on by default) has
        # nothing to do locally, and a clientSelector set is reported.
        "spec.security.clientSelector": spec.client_selector is not None,
        # cert-manager runs on Kubernetes: locally the supervisor generates the certificates.
        "spec.security.tls.issuerRef": spec.tls_issuer is not None,
    }
    return tuple(name for name, is_set in fields.items() if is_set)
