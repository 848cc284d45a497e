"""The manifest builders, the TLS material and the pure pod-state rules of supervisor.kube."""

from __future__ import annotations

import base64
import datetime as dt
import re

import attrs
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from actors.model import (
    ClusterRef,
    ClusterSpec,
    MemberLaunch,
    PodSettings,
    PodTemplate,
    ProcessState,
    ResourceSpec,
    RuntimeMember,
    exit_story,
)
from supervisor.cli import build_parser
from supervisor.kube import manifests as m
from supervisor.kube.pods import (
    consecutive_failures,
    failures_after,
    member_ref,
    pod_last_error,
    pod_state,
)
from supervisor.kube.tls import generate_cluster_tls

REF = ClusterRef("prod", "main")
OWNER = m.Owner(REF, "uid-1")


def launch(
    spec: ClusterSpec, name: str = "main-0", state: str = "new", cluster_domain: str = "cluster.local"
) -> MemberLaunch:
    urls = m.member_urls(REF, name, tls=spec.tls_enabled, cluster_domain=cluster_domain)
    return MemberLaunch(
        cluster=REF,
        name=name,
        urls=urls,
        initial_cluster=((name, urls.peer_url),),
        initial_cluster_state=state,
        spec=spec,
    )


def test_member_urls_are_fully_qualified_dns_names_under_the_peer_service() -> None:
    urls = m.member_urls(REF, "main-3", tls=True)
    assert urls.peer_url == "https://main-3.main-peer.prod.svc.cluster.local:2380"
    assert urls.client_url == "https://main-3.main-peer.prod.svc.cluster.local:2379"
    assert m.member_urls(REF, "main-3", tls=False).client_url.startswith("http://")


def test_member_urls_follow_the_cluster_domain() -> None:
    urls = m.member_urls(REF, "main-3", tls=True, cluster_domain="k8s.corp.example")
    assert urls.peer_url == "https://main-3.main-peer.prod.svc.k8s.corp.example:2380"
    assert m.member_host(REF, "main-3", "k8s.corp.example") == "main-3.main-peer.prod.svc.k8s.corp.example"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("cluster.local", "cluster.local"),
        ("Cluster.Local.", "cluster.local"),
        (" k8s-1.example ", "k8s-1.example"),
    ],
)
def test_cluster_domain_is_normalised(given: str, expected: str) -> None:
    assert m.normalize_cluster_domain(given) == expected


@pytest.mark.parametrize(
    "bad", ["", ".", "a..b", "-x.local", "x-.local", "under_score.local", "a/b", "a" * 64]
)
def test_cluster_domain_rejects_what_is_no_dns_domain(bad: str) -> None:
    with pytest.raises(ValueError, match="not a DNS domain"):
        m.normalize_cluster_domain(bad)


def test_run_takes_the_cluster_domain_flag() -> None:
    parser = build_parser()
    assert parser.parse_args(["run"]).cluster_domain == "cluster.local"
    assert parser.parse_args(["run", "--cluster-domain", "Corp.Example."]).cluster_domain == "corp.example"
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--cluster-domain", "bad_domain"])


def test_peer_service_is_headless_and_publishes_not_ready_addresses() -> None:
    svc = m.peer_service(OWNER)
    assert svc["metadata"]["name"] == "main-peer"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert {p["port"] for p in svc["spec"]["ports"]} == {2379, 2380}


def test_peer_service_publishes_member_pods_and_warm_pods_or_members_only_until_migrated() -> None:
    selector = m.peer_service(OWNER)["spec"]["selector"]
    assert selector == {**m.cluster_labels(REF), m.LABEL_PEER_RECORD: "true"}
    member = m.member_pod(OWNER, launch(ClusterSpec()))
    assert selector.items() <= member["metadata"]["labels"].items()
    # What operators before the label selected, kept until every member pod carries it.
    assert m.peer_service(OWNER, warm_records=False)["spec"]["selector"] == m.member_selector(REF)


def test_client_service_only_routes_to_ready_members() -> None:
    svc = m.client_service(OWNER)
    assert svc["metadata"]["name"] == "main-client"
    assert "publishNotReadyAddresses" not in svc["spec"]
    assert svc["spec"].get("clusterIP") != "None"


def test_every_object_is_owned_by_the_cluster_and_labelled() -> None:
    spec = ClusterSpec()
    objs = [
        m.peer_service(OWNER),
        m.client_service(OWNER),
        m.disruption_budget(OWNER, 2),
        m.member_volume_claim(OWNER, spec, "main-0", m.member_urls(REF, "main-0", tls=True)),
        m.member_pod(OWNER, launch(spec)),
    ]
    for obj in objs:
        meta = obj["metadata"]
        assert meta["namespace"] == "prod"
        (owner,) = meta["ownerReferences"]
        assert owner == {
            "apiVersion": "etcd.io/v1alpha1",
            "kind": "EtcdCluster",
            "name": "main",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert meta["labels"]["app.kubernetes.io/name"] == "etcd"
        assert meta["labels"]["app.kubernetes.io/instance"] == "main"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "etcd-supervisor"
    for member_obj in objs[3:]:
        assert member_obj["metadata"]["labels"]["app.kubernetes.io/component"] == "member"
        assert member_obj["metadata"]["labels"]["etcd.io/member"] == "main-0"


def test_disruption_budget_keeps_quorum_of_the_voters() -> None:
    pdb = m.disruption_budget(OWNER, 3)
    assert pdb["spec"]["minAvailable"] == 3 and "maxUnavailable" not in pdb["spec"]
    assert pdb["spec"]["selector"]["matchLabels"] == {**m.member_selector(REF), "etcd.io/voter": "true"}
    # Membership not read yet: nothing admitted until it is.
    assert m.disruption_budget(OWNER, None)["spec"]["minAvailable"] == "100%"


def test_official_pod_uses_flags_and_its_own_dns_name() -> None:
    spec = ClusterSpec(
        tls_enabled=False, resources=ResourceSpec(requests={"cpu": "100m"}, limits={"memory": "512Mi"})
    )
    pod = m.member_pod(OWNER, launch(spec, state="existing"))
    pod_spec = pod["spec"]
    assert pod_spec["hostname"] == "main-0"
    assert pod_spec["subdomain"] == "main-peer"
    (etcd,) = pod_spec["containers"]
    assert etcd["image"] == "quay.io/coreos/etcd:v3.6.16"
    assert "env" not in etcd
    args = etcd["args"]
    assert "--name=main-0" in args
    assert "--initial-cluster-state=existing" in args
    assert "--initial-cluster=main-0=http://main-0.main-peer.prod.svc.cluster.local:2380" in args
    assert "--advertise-client-urls=http://main-0.main-peer.prod.svc.cluster.local:2379" in args
    assert "--initial-cluster-token=main-uid-1" in args
    assert "tcpSocket" not in etcd["readinessProbe"]
    assert etcd["resources"] == {"requests": {"cpu": "100m"}, "limits": {"memory": "512Mi"}}
    assert not any("force-new-cluster" in a for a in args)
    # A quorum-loss recovery starts this one pod on its own data as a one-member cluster;
    # with restartPolicy Never, the next start is another pod from a launch without it.
    forced = m.member_pod(OWNER, attrs.evolve(launch(spec, state="existing"), force_new_cluster=True))
    assert "--force-new-cluster=true" in forced["spec"]["containers"][0]["args"]
    assert pod_spec["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "main-0-data"}}]
    anti = pod_spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert pod_spec["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"
    # Members never call the API (no token mounted), and get no ETCD_*-looking Service variables.
    assert pod_spec["automountServiceAccountToken"] is False
    assert pod_spec["enableServiceLinks"] is False


def test_every_name_a_member_resolves_is_looked_up_as_it_is_first() -> None:
    """The pod's ndots is at most the dots in every host name in its etcd flags, so the
    resolver asks for each as written before any search-list suffix (two queries, not eight),
    and a lost answer is retried after 1 s: a joining member's membership fetch has ~2 s."""
    spec = ClusterSpec(tls_enabled=True)
    for domain in ("cluster.local", "k8s"):  # the default and a short one a user may set
        pod = m.member_pod(OWNER, launch(spec, cluster_domain=domain))
        options = {o["name"]: o["value"] for o in pod["spec"]["dnsConfig"]["options"]}
        hosts = re.findall(r"https?://([^:/,]+)", " ".join(pod["spec"]["containers"][0]["args"]))
        assert hosts and all(h.count(".") >= int(options["ndots"]) for h in hosts), hosts
        assert int(options["timeout"]) == 1 and int(options["attempts"]) >= 2


@pytest.mark.parametrize("tls", [True, False])
def test_bitnami_pod_runs_the_images_etcd_with_the_official_flags_and_none_of_its_scripts(tls: bool) -> None:
    official = m.member_pod(OWNER, launch(ClusterSpec(tls_enabled=tls)))
    pod = m.member_pod(OWNER, launch(ClusterSpec(repository="docker.io/bitnami/etcd", tls_enabled=tls)))
    (etcd,) = pod["spec"]["containers"]
    (theirs,) = official["spec"]["containers"]
    assert etcd["image"] == "docker.io/bitnami/etcd:3.6.16"
    # The image's binary, never its entrypoint (which manages membership by itself).
    assert etcd["command"] == ["/opt/bitnami/etcd/bin/etcd"]
    assert etcd["args"] == [a.replace("/var/lib/etcd/", "/bitnami/etcd/") for a in theirs["args"]]
    assert "--data-dir=/bitnami/etcd/data" in etcd["args"]
    # No environment: etcd reads ETCD_* as flags, and refuses one that shadows a flag given.
    assert "env" not in etcd
    assert "lifecycle" not in etcd  # no preStop: Bitnami's removes the member on every stop
    assert etcd["readinessProbe"] == theirs["readinessProbe"]
    assert etcd["volumeMounts"][0] == {"name": "data", "mountPath": "/bitnami/etcd"}
    assert etcd["securityContext"]["runAsUser"] == 1001
    assert etcd["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 1001}


def test_bitnami_volume_is_given_to_its_user_by_root_with_chown_alone() -> None:
    pod = m.member_pod(OWNER, launch(ClusterSpec(repository="bitnami/etcd")))
    (init,) = pod["spec"]["initContainers"]
    assert init["image"] == pod["spec"]["containers"][0]["image"]
    assert init["command"] == ["chown", "1001:1001", "/bitnami/etcd"]
    assert init["volumeMounts"] == [{"name": "data", "mountPath": "/bitnami/etcd"}]
    security = init["securityContext"]
    assert (security["runAsUser"], security["runAsNonRoot"]) == (0, False)
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert security["allowPrivilegeEscalation"] is False


def test_official_pod_runs_as_the_image_says_without_an_init_container() -> None:
    pod = m.member_pod(OWNER, launch(ClusterSpec()))
    (etcd,) = pod["spec"]["containers"]
    assert etcd["command"] == ["/usr/local/bin/etcd"]
    assert "initContainers" not in pod["spec"] and "env" not in etcd
    # The image's user (root), without privilege, under the runtime's seccomp profile.
    assert pod["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert etcd["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@pytest.mark.parametrize("repository", ["quay.io/coreos/etcd", "docker.io/bitnami/etcd"])
def test_a_template_that_says_run_as_non_root_makes_nothing_run_as_root(repository: str) -> None:
    """podTemplate `runAsNonRoot: true`: no root init container (Bitnami's volume owner); the
    official image's etcd as 65532 unless the template names a user; each pod kind alike."""
    template = PodTemplate(spec=PodSettings(security_context={"runAsNonRoot": True}))
    spec = ClusterSpec(repository=repository, pod_template=template)
    pod = m.member_pod(OWNER, launch(spec))
    assert "initContainers" not in pod["spec"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    user = pod["spec"]["containers"][0]["securityContext"].get("runAsUser")
    assert (user or pod["spec"]["securityContext"]["runAsUser"]) in (1001, 65532)
    named = PodTemplate(spec=PodSettings(security_context={"runAsNonRoot": True, "runAsUser": 1000}))
    named_pod = m.member_pod(OWNER, launch(ClusterSpec(repository=repository, pod_template=named)))
    if "bitnami" not in repository:  # the official image's etcd runs as the template's user
        assert named_pod["spec"]["securityContext"]["runAsUser"] == 1000
        assert "runAsUser" not in named_pod["spec"]["containers"][0]["securityContext"]


def test_debug_sidecar_only_on_request() -> None:
    assert len(m.member_pod(OWNER, launch(ClusterSpec()))["spec"]["containers"]) == 1
    pod = m.member_pod(OWNER, launch(ClusterSpec(debug_sidecar=True)))
    sidecar = pod["spec"]["containers"][1]
    assert sidecar["image"].startswith("nicolaka/netshoot")
    assert sidecar["resources"] == {
        "requests": {"cpu": "50m", "memory": "64Mi"},
        "limits": {"cpu": "100m", "memory": "128Mi"},
    }


def test_tls_pod_mounts_only_the_member_material_and_uses_https() -> None:
    pod = m.member_pod(OWNER, launch(ClusterSpec(tls_enabled=True)))
    etcd = pod["spec"]["containers"][0]
    args = etcd["args"]
    assert "--listen-peer-urls=https://0.0.0.0:2380" in args
    assert "--peer-client-cert-auth=true" in args and "--client-cert-auth=true" in args
    assert "--cert-file=/etc/etcd/tls/tls.crt" in args
    tls_volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "tls")
    assert tls_volume["secret"]["secretName"] == "main-tls"
    assert {i["key"] for i in tls_volume["secret"]["items"]} == {"ca.crt", "tls.crt", "tls.key"}  # no CA key


def test_claim_carries_size_class_and_urls() -> None:
    spec = ClusterSpec()
    spec = ClusterSpec(storage=type(spec.storage)(size="1Gi", storage_class_name="fast"))
    urls = m.member_urls(REF, "main-1", tls=True)
    pvc = m.member_volume_claim(OWNER, spec, "main-1", urls)
    assert pvc["metadata"]["name"] == "main-1-data"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert pvc["spec"]["storageClassName"] == "fast"
    assert pvc["metadata"]["annotations"][m.ANNOTATION_PEER_URL] == urls.peer_url


def _member_sans(data: dict[str, str]) -> list[str]:
    cert = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )


def test_tls_sans_follow_the_cluster_domain_and_keep_the_short_form() -> None:
    now = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    sans = _member_sans(generate_cluster_tls(REF, now=now, cluster_domain="k8s.corp.example").secret_data())
    host = m.member_host(REF, "main-7", "k8s.corp.example")
    assert "*." + host.split(".", 1)[1] in sans  # the FQDN the operator dials
    assert "*.main-peer.prod.svc" in sans  # members created before URLs were fully qualified
    assert "main-client.prod.svc.k8s.corp.example" in sans
    assert not any(san.endswith("cluster.local") for san in sans)


def test_tls_material_covers_members_and_client_service() -> None:
    now = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    material = generate_cluster_tls(REF, now=now)
    data = material.secret_data()
    assert "*." + m.member_host(REF, "main-0").split(".", 1)[1] in _member_sans(data)
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key", "client.crt", "client.key"}
    ca = x509.load_pem_x509_certificate(base64.b64decode(data["ca.crt"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert "*.main-peer.prod.svc" in sans
    assert "*.main-peer.prod.svc.cluster.local" in sans
    assert "main-client.prod.svc" in sans
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages and ExtendedKeyUsageOID.CLIENT_AUTH in usages
    client = x509.load_pem_x509_certificate(base64.b64decode(data["client.crt"]))
    client.verify_directly_issued_by(ca)


def pod(
    phase: str,
    *,
    ready: bool = False,
    deleting: bool = False,
    failures: int = 0,
    ran: float = 1.0,
    exit_code: int = 1,
    etcd_exited: bool | None = None,
) -> dict:
    exited = phase == "Failed" if etcd_exited is None else etcd_exited
    started = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    finished = started + dt.timedelta(seconds=ran)
    meta: dict = {"annotations": {m.ANNOTATION_FAILURES: str(failures)}}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [
                {
                    "name": "etcd",
                    "state": {
                        "terminated": {
                            "exitCode": exit_code,
                            "startedAt": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "finishedAt": finished.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        }
                    }
                    if exited
                    else {"running": {}},
                }
            ],
        },
    }


def test_pod_state_from_phase_and_readiness() -> None:
    assert pod_state(None) is ProcessState.ABSENT
    assert pod_state(pod("Pending")) is ProcessState.STARTING
    assert pod_state(pod("Running")) is ProcessState.STARTING
    assert pod_state(pod("Running", ready=True)) is ProcessState.RUNNING
    assert pod_state(pod("Running", ready=True, deleting=True)) is ProcessState.EXITED
    assert pod_state(pod("Failed")) is ProcessState.EXITED
    assert pod_state(pod("Succeeded")) is ProcessState.EXITED


def test_crash_counting_across_replacement_pods() -> None:
    assert failures_after(pod("Failed", failures=2)) == 3
    assert failures_after(pod("Failed", failures=2, ran=3600)) == 1  # ran healthily first
    assert failures_after(pod("Succeeded", failures=2)) == 0
    # Killed by a signal (137 = SIGKILL, the OOM killer's): not a failure of its own.
    assert failures_after(pod("Failed", failures=2, exit_code=137)) == 2
    assert consecutive_failures(pod("Running", ready=True, failures=4)) == 0
    assert consecutive_failures(pod("Pending", failures=4)) == 4
    assert consecutive_failures(pod("Failed", failures=4)) == 5


def test_etcd_that_exited_beside_a_container_still_running_has_exited() -> None:
    # A warm pod's first container or the debug one keeps the pod Running (restartPolicy Never:
    # etcd will not run again in it), and the pod is no longer Ready.
    exited = pod("Running", etcd_exited=True, failures=2)
    assert pod_state(exited) is ProcessState.EXITED
    assert consecutive_failures(exited) == 3
    assert failures_after(pod("Running", etcd_exited=True, failures=2, exit_code=0)) == 0


def test_a_pod_whose_image_cannot_be_pulled_counts_as_failing_to_start() -> None:
    stuck = pod("Pending")
    stuck["status"]["containerStatuses"][0]["state"] = {
        "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "etcd:v9.9.9"'}
    }
    assert pod_state(stuck) is ProcessState.STARTING  # still waiting: nothing restarts it
    assert consecutive_failures(stuck) == 1
    assert pod_last_error(stuck) == 'ImagePullBackOff: Back-off pulling image "etcd:v9.9.9"'
    member = RuntimeMember(
        "main-1",
        m.member_urls(REF, "main-1", tls=True),
        pod_state(stuck),
        True,
        consecutive_failures=consecutive_failures(stuck),
        last_error=pod_last_error(stuck),
    )
    # What the Upgrading condition and Events then say of it.
    assert exit_story(member) == 'cannot start (ImagePullBackOff: Back-off pulling image "etcd:v9.9.9")'
    creating = pod("Pending")
    creating["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "ContainerCreating"}}
    assert consecutive_failures(creating) == 0 and pod_last_error(creating) == ""


def test_member_ref_reads_our_labels_only() -> None:
    obj = m.member_pod(OWNER, launch(ClusterSpec()))
    assert member_ref(obj) == (REF, "main-0")
    obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "someone-else"
    assert member_ref(obj) is None


def test_a_member_pod_keeps_off_nodes_that_lately_stranded_a_member_and_spreads_as_before():
    spec = ClusterSpec(size=3)
    plain = m.member_pod(OWNER, launch(spec))
    assert "nodeAffinity" not in plain["spec"]["affinity"]
    pod = m.member_pod(OWNER, launch(spec), avoid_nodes=("node-b", "node-a"))
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-a", "node-b"]}]}
        ]
    }
    assert pod["spec"]["affinity"]["podAntiAffinity"] == plain["spec"]["affinity"]["podAntiAffinity"]


def test_keeping_off_lost_nodes_holds_in_every_node_selector_term_a_template_gave():
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["etcd"]}]},
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                    ]
                }
            }
        }
    }
    m.keep_off(spec, ["lost"])
    off = {"key": "metadata.name", "operator": "NotIn", "values": ["lost"]}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms[0] == {
        "matchExpressions": [{"key": "pool", "operator": "In", "values": ["etcd"]}],
        "matchFields": [off],
    }
    assert terms[1]["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["n1"]}, off]
