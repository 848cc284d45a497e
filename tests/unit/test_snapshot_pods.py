"""The verify and restore pods (supervisor/kube/snapshot_pods.py): what they run and where they
put the data, checked against the member pod that will use it."""

from __future__ import annotations

from typing import Any, cast

import pytest
import trio

from actors.errors import RestoreFailed
from actors.model import ClusterSpec, LocalStore, RestoreSpec, StoreSpec
from supervisor.etcd.head_hash import answer_within
from supervisor.kube import manifests as m
from supervisor.kube import snapshot_pods as pods
from supervisor.kube.client import KubeClient
from supervisor.kube.pods import member_ref
from supervisor.kube.snapshot_transfer import RECEIVE_PORT, Received
from supervisor.kube.snapshots import POD_TIMEOUT, KubeRestorer, SnapshotPodFailed, _answering_within
from tests.unit.test_kube_manifests import OWNER, REF, launch

IMAGE = "registry.example/etcd-supervisor:1.2"
BITNAMI = ClusterSpec(repository="bitnami/etcd", version="3.5.17")


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    everything = pod["spec"].get("initContainers", []) + pod["spec"]["containers"]
    return next(c for c in everything if c["name"] == name)


def flag(c: dict[str, Any], name: str) -> str:
    return next(a.split("=", 1)[1] for a in c["args"] if a.startswith(f"--{name}="))


@pytest.mark.parametrize("spec", [ClusterSpec(), BITNAMI, ClusterSpec(version="3.4.25")])
def test_the_restore_pod_lays_the_data_where_the_member_pod_reads_it(spec: ClusterSpec) -> None:
    seed = launch(spec)
    pod = pods.restore_pod(
        OWNER, seed, name="main-restore-1", helper_image=IMAGE, token="t", cluster_token="new"
    )
    member = m.member_pod(OWNER, seed)
    receive, *owner = pod["spec"]["initContainers"]
    # The member pod's volume owner too, if it has one: the restore writes as the image's user.
    assert owner == member["spec"].get("initContainers", [])
    assert receive["image"] == IMAGE and f"--port={RECEIVE_PORT}" in receive["args"]
    assert receive["securityContext"]["runAsNonRoot"] is True
    restore = container(pod, "restore")
    assert restore["image"] == spec.image == member["spec"]["containers"][0]["image"]
    # The same claim, mounted where the member mounts it, restored into its data dir, as the
    # member named in its own initial cluster, under a token of its own (a new cluster ID).
    claim = lambda p: next(v for v in p["spec"]["volumes"] if v["name"] == "data")  # noqa: E731
    assert claim(pod) == claim(member)
    member_mount = next(v for v in member["spec"]["containers"][0]["volumeMounts"] if v["name"] == "data")
    assert {"name": "data", "mountPath": member_mount["mountPath"]} in restore["volumeMounts"]
    assert flag(restore, "data-dir") == f"{member_mount['mountPath']}/data"
    assert flag(restore, "name") == seed.name
    assert flag(restore, "initial-cluster") == seed.initial_cluster_flag()
    assert flag(restore, "initial-advertise-peer-urls") == seed.urls.peer_url
    assert flag(restore, "initial-cluster-token") == "new"
    # The member's name resolves to this pod (etcdutl checks the peer URL against it).
    (alias,) = pod["spec"]["hostAliases"]
    assert alias == {"ip": "127.0.0.1", "hostnames": [m.member_host(REF, seed.name)]}
    tool = restore["command"][0]
    assert tool.endswith("etcdctl" if spec.version.startswith("3.4") else "etcdutl")
    assert tool.startswith("/opt/bitnami/etcd/bin/" if "bitnami" in spec.repository else "/usr/local/bin/")
    if spec.version.startswith("3.4"):
        assert {"name": "ETCDCTL_API", "value": "3"} in restore["env"]
    assert restore.get("securityContext") == member["spec"]["containers"][0].get("securityContext")
    assert pod["spec"].get("securityContext") == member["spec"].get("securityContext")


def test_the_bitnami_restore_gives_the_volume_to_uid_1001_before_it_writes_as_it() -> None:
    pod = pods.restore_pod(
        OWNER, launch(BITNAMI), name="main-restore-1", helper_image=IMAGE, token="t", cluster_token="new"
    )
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["receive", "volume-owner"]
    assert container(pod, "volume-owner")["command"] == ["chown", "1001:1001", "/bitnami/etcd"]
    assert container(pod, "restore")["securityContext"]["runAsUser"] == 1001


def test_the_bitnami_verify_pod_runs_the_images_tools_as_its_user() -> None:
    pod = pods.verify_pod(OWNER, BITNAMI, name="main-verify-1", helper_image=IMAGE, token="t")
    for name in ("restore", "etcd"):
        c = container(pod, name)
        assert c["command"][0].startswith("/opt/bitnami/etcd/bin/"), c["command"]
        assert c["securityContext"]["runAsUser"] == 1001 and "env" not in c
    # Its scratch directory is an emptyDir: nobody's to chown.
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["receive", "restore"]


def test_the_verify_pod_serves_the_restored_snapshot_alone() -> None:
    spec = ClusterSpec(tls_enabled=False)
    pod = pods.verify_pod(OWNER, spec, name="main-verify-1", helper_image=IMAGE, token="t")
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["receive", "restore"]
    restore, etcd = container(pod, "restore"), container(pod, "etcd")
    assert flag(restore, "data-dir") == flag(etcd, "data-dir")
    # No peer can reach it, nor it a peer: its peer URL is loopback, its cluster of one.
    assert flag(etcd, "listen-peer-urls").startswith("http://127.0.0.1:")
    assert flag(restore, "initial-cluster") == f"scratch={flag(etcd, 'listen-peer-urls')}"
    assert flag(etcd, "listen-client-urls") == f"http://0.0.0.0:{m.CLIENT_PORT}"
    assert "volumes" in pod["spec"] and all("emptyDir" in v for v in pod["spec"]["volumes"])


def _tls_mount(c: dict[str, Any]) -> dict[str, Any]:
    return next(v for v in c["volumeMounts"] if v["name"] == "tls")


@pytest.mark.parametrize("kind", ["verify", "restore"])
def test_with_tls_on_the_snapshot_never_crosses_the_pod_network_in_the_clear(kind: str) -> None:
    spec = ClusterSpec(tls_enabled=True)
    if kind == "verify":
        pod = pods.verify_pod(OWNER, spec, name="x", helper_image=IMAGE, token="t")
    else:
        pod = pods.restore_pod(
            OWNER, launch(spec), name="x", helper_image=IMAGE, token="t", cluster_token="c"
        )
    # The cluster's CA certificate and member key pair, never the CA key, readable by the
    # receiving container's (non-root) user.
    (tls,) = [v for v in pod["spec"]["volumes"] if v["name"] == "tls"]
    assert tls["secret"]["secretName"] == m.tls_secret_name(REF)
    assert {i["key"] for i in tls["secret"]["items"]} == {m.TLS_CA_CERT, m.TLS_CERT, m.TLS_KEY}
    assert tls["secret"]["defaultMode"] & 0o004
    # The push is received over TLS with the member certificate.
    receive = container(pod, "receive")
    mount = _tls_mount(receive)["mountPath"]
    assert flag(receive, "tls-cert") == f"{mount}/{m.TLS_CERT}"
    assert flag(receive, "tls-key") == f"{mount}/{m.TLS_KEY}"
    if kind == "verify":
        # The scratch etcd serves its client port as members do: TLS, client certificates only.
        etcd = container(pod, "etcd")
        assert flag(etcd, "listen-client-urls") == f"https://0.0.0.0:{m.CLIENT_PORT}"
        assert flag(etcd, "cert-file") == f"{_tls_mount(etcd)['mountPath']}/{m.TLS_CERT}"
        assert flag(etcd, "trusted-ca-file") == f"{_tls_mount(etcd)['mountPath']}/{m.TLS_CA_CERT}"
        assert "--client-cert-auth" in etcd["args"]


@pytest.mark.parametrize("kind", ["verify", "restore"])
def test_snapshot_pods_are_owned_bounded_and_never_taken_for_members(kind: str) -> None:
    if kind == "verify":
        pod = pods.verify_pod(OWNER, ClusterSpec(), name="x", helper_image=IMAGE, token="t")
    else:
        pod = pods.restore_pod(
            OWNER, launch(ClusterSpec()), name="x", helper_image=IMAGE, token="t", cluster_token="c"
        )
    assert pod["metadata"]["ownerReferences"] == [m.owner_reference(OWNER)]
    assert member_ref(pod) is None  # the runtime's pod watch ignores it
    labels = pod["metadata"]["labels"]
    assert labels[m.LABEL_COMPONENT] != m.COMPONENT_MEMBER and m.LABEL_MEMBER not in labels
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] > 0
    assert spec["automountServiceAccountToken"] is False


class NoBackups:
    """A store with nothing in it (no pod is made: the client is None)."""

    async def list(self, prefix: str) -> list:
        return []

    async def aclose(self) -> None:
        pass


@pytest.mark.trio
async def test_a_point_in_time_restore_without_a_snapshot_below_it_fails_naming_it() -> None:
    restorer = KubeRestorer(
        cast(KubeClient, None), lambda cluster, spec: cast(Any, NoBackups()), IMAGE, tls_files=cast(Any, None)
    )
    source = RestoreSpec(store=StoreSpec(local=LocalStore("/b")), key="ns/main/x.db", revision=1480)
    with pytest.raises(RestoreFailed, match=r"no verified snapshot of ns/main at or below revision 1480"):
        await restorer.restore_seed(launch(ClusterSpec(tls_enabled=False)), source)


async def test_a_scratch_etcd_that_never_answers_fails_its_pod_after_a_wait_sized_by_the_snapshot(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Not POD_TIMEOUT's quarter of an hour, during which no other backup is taken: a minute, and
    a minute per GiB; the backup is then tried again on a new pod."""
    for size in (1 << 20, 4 << 30):
        started = trio.current_time()
        with (
            pytest.raises(SnapshotPodFailed, match="the etcd of pod p did not answer within"),
            _answering_within("p", Received(size, "sha")),
        ):
            await trio.sleep_forever()
        waited = trio.current_time() - started
        assert waited == pytest.approx(answer_within(size))
        assert 60 <= waited < POD_TIMEOUT
    assert answer_within(4 << 30) > answer_within(1 << 20) + 200  # a big snapshot rebuilds longer
    with _answering_within("p", Received(1 << 20, "sha")):
        await trio.sleep(59)  # one that answers in time is let be
