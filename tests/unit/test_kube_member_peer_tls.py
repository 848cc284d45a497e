"""Member pod details that only a real node showed were needed (issue 16)."""

from __future__ import annotations

from actors.model import ClusterRef, ClusterSpec, MemberLaunch
from supervisor.kube import manifests as m

REF = ClusterRef("prod", "main")
OWNER = m.Owner(REF, "uid-1")


def etcd_container(spec: ClusterSpec) -> dict:
    urls = m.member_urls(REF, "main-1", tls=spec.tls_enabled)
    launch = MemberLaunch(
        cluster=REF,
        name="main-1",
        urls=urls,
        initial_cluster=(("main-1", urls.peer_url),),
        initial_cluster_state="existing",
        spec=spec,
    )
    return m.member_pod(OWNER, launch)["spec"]["containers"][0]


def test_peers_are_not_checked_against_their_pod_ip_with_tls() -> None:
    # The wildcard SANs cannot name a new pod's IP; the peer CA check still applies.
    args = etcd_container(ClusterSpec(version="3.5.21"))["args"]
    assert "--experimental-peer-skip-client-san-verification=true" in args
    assert "--peer-client-cert-auth=true" in args and "--peer-trusted-ca-file=/etc/etcd/tls/ca.crt" in args
    assert "--peer-skip-client-san-verification=true" in etcd_container(ClusterSpec(version="3.6.5"))["args"]
    assert "--peer-skip-client-san-verification=true" in etcd_container(ClusterSpec(version="3.7.3"))["args"]
    assert (
        "--experimental-peer-skip-client-san-verification=true"
        in etcd_container(ClusterSpec(version="3.4.37"))["args"]
    )


def test_no_peer_tls_flags_without_tls() -> None:
    assert not any("san-verification" in a for a in etcd_container(ClusterSpec(tls_enabled=False))["args"])


def test_bitnami_gets_the_same_setting_as_a_flag() -> None:
    def args(version: str) -> list[str]:
        return list(etcd_container(ClusterSpec(repository="bitnami/etcd", version=version))["args"])

    assert "--experimental-peer-skip-client-san-verification=true" in args("3.5.35")
    # 3.7 knows only the name 3.6 gave it.
    assert "--peer-skip-client-san-verification=true" in args("3.7.3")
    assert not any("experimental-peer-skip" in a for a in args("3.7.3"))


def test_readiness_is_probed_from_the_start_every_second() -> None:
    probe = etcd_container(ClusterSpec(tls_enabled=False))["readinessProbe"]
    assert probe["initialDelaySeconds"] == 0 and probe["periodSeconds"] == 1
