"""Certificates the user brings in the local runtime (secretRef as a directory): what is copied,
what is refused naming the file and the rule, how the copy is read and digested, and the
members' command line with the user's peer pair (a generated cluster's unchanged)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import trio

from actors.errors import CertificatesRefused
from actors.model import ClusterRef, ClusterSpec, MemberLaunch, MemberUrls
from supervisor import brought_tls, pki
from supervisor.etcd.tls import TlsFiles
from supervisor.local import byo_tls
from supervisor.local.etcd_command import etcd_argv
from supervisor.local.layout import MemberLayout, StateLayout
from supervisor.local.tls import LocalCertificates, ensure_ca, trust_of

NOW = dt.datetime.now(dt.UTC)
DAY = dt.timedelta(days=1)
REF = ClusterRef("default", "demo")


def user_files(directory: Path, ca: pki.KeyPair | None = None, *, loopback: bool = True) -> dict[str, bytes]:
    ca = ca or pki.new_ca("user ca", now=NOW, lifetime=100 * DAY)
    names = {"dns": ["localhost"], "ips": ["127.0.0.1"]} if loopback else {"dns": ["etcd.example"]}
    server = pki.issue(ca, "server", now=NOW, lifetime=10 * DAY, server_auth=True, client_auth=False, **names)
    peer = pki.issue(ca, "peer", now=NOW, lifetime=10 * DAY, server_auth=True, client_auth=True, **names)
    client = pki.issue(ca, "root", now=NOW, lifetime=10 * DAY, server_auth=False, client_auth=True)
    pems = {"ca.crt": ca.cert_pem()}
    for stem, pair in {"server": server, "peer": peer, "client": client}.items():
        pems |= {f"{stem}.crt": pair.cert_pem(), f"{stem}.key": pair.key_pem()}
    directory.mkdir(parents=True, exist_ok=True)
    for name, pem in pems.items():
        (directory / name).write_bytes(pem)
    return pems


def test_the_users_directory_is_copied_once_and_read_as_brought_material(tmp_path: Path) -> None:
    source, tls_dir = tmp_path / "secrets" / "my-tls", StateLayout(tmp_path / "state").cluster(REF).tls_dir
    pems = user_files(source)
    assert byo_tls.sync_copy(source, tls_dir, now=NOW)
    assert not byo_tls.sync_copy(source, tls_dir, now=NOW)  # unchanged: nothing written
    assert byo_tls.read(tls_dir) == pems and byo_tls.is_brought(tls_dir)
    assert (tls_dir / "peer.key").stat().st_mode & 0o077 == 0
    assert trust_of(tls_dir) == brought_tls.trust(pems)

    store = LocalCertificates(tmp_path / "state", secrets_dir=tmp_path / "secrets")
    state = trio.run(store.read, REF)
    assert state is not None and state.trust == brought_tls.trust(pems)
    assert [leaf.name for leaf in state.leaves] == ["server", "peer", "client"]

    user_files(source, pki.new_ca("user ca", now=NOW, lifetime=100 * DAY))  # the user renews
    trio.run(store.follow_source, REF, "my-tls")
    assert trust_of(tls_dir) != brought_tls.trust(pems)  # members are rolled to take it


def test_a_broken_directory_is_refused_naming_the_file_and_the_copy_is_kept(tmp_path: Path) -> None:
    source, tls_dir = tmp_path / "my-tls", tmp_path / "tls"
    good = user_files(source)
    byo_tls.sync_copy(source, tls_dir, now=NOW)

    def refusal() -> str:
        with pytest.raises(CertificatesRefused) as caught:
            byo_tls.sync_copy(source, tls_dir, now=NOW)
        return str(caught.value)

    (source / "peer.key").unlink()
    assert refusal() == f"secretRef: {source}: missing peer.key"
    (source / "peer.key").write_bytes(good["server.key"])
    assert "peer.key is not the key of peer.crt" in refusal()
    ca = pki.new_ca("user ca", now=NOW, lifetime=100 * DAY)
    user_files(source, ca)
    one_way = pki.issue(
        ca, "p", now=NOW, lifetime=DAY, ips=["127.0.0.1"], server_auth=True, client_auth=False
    )
    (source / "peer.key").write_bytes(one_way.key_pem())
    (source / "peer.crt").write_bytes(one_way.cert_pem())
    assert refusal() == (
        f"secretRef: {source}: peer.crt: needs both serverAuth and clientAuth (etcd presents it to its peers)"
    )
    user_files(source, loopback=False)
    assert refusal() == (
        f"secretRef: {source}: server.crt does not name 127.0.0.1 (an IP subjectAltName): local members"
        " listen there; peer.crt does not name 127.0.0.1 (an IP subjectAltName): local members listen there"
    )
    assert byo_tls.read(tls_dir) == good  # members keep what they run on
    missing = tmp_path / "nowhere"
    with pytest.raises(CertificatesRefused, match=f"secretRef: {missing} is not a directory"):
        byo_tls.sync_copy(missing, tls_dir, now=NOW)


def test_without_a_directory_of_secrets_the_store_says_so() -> None:
    store = LocalCertificates(Path("/nonexistent"))
    with pytest.raises(CertificatesRefused, match=r"secretRef \(my-tls\): this supervisor has no directory"):
        trio.run(store.follow_source, REF, "my-tls")


def launch(tmp_path: Path) -> tuple[MemberLaunch, MemberLayout]:
    urls = MemberUrls("https://127.0.0.1:2380", "https://127.0.0.1:2379")
    spec = ClusterSpec(tls_enabled=True)
    return MemberLaunch(REF, "demo-0", urls, (), "new", spec), MemberLayout(tmp_path / "demo-0")


def flags(argv: list[str], prefix: str) -> dict[str, str]:
    return dict(a.removeprefix("--").split("=", 1) for a in argv if a.startswith(f"--{prefix}"))


def test_a_brought_cluster_serves_its_peer_pair_on_the_peer_listener_and_a_generated_one_is_unchanged(
    tmp_path: Path,
) -> None:
    member_launch, member = launch(tmp_path)
    own = TlsFiles("/c/ca.crt", "/m/member.crt", "/m/member.key")
    generated = etcd_argv(Path("etcd"), member_launch, member, own)
    assert flags(generated, "peer-") == {
        "peer-cert-file": "/m/member.crt",
        "peer-key-file": "/m/member.key",
        "peer-trusted-ca-file": "/c/ca.crt",
        "peer-client-cert-auth": "true",
    }
    server = byo_tls.files(Path("/c"), brought_tls.SERVER)
    brought = etcd_argv(
        Path("etcd"), member_launch, member, server, peer_tls=byo_tls.files(Path("/c"), brought_tls.PEER)
    )
    assert flags(brought, "cert-file") == {"cert-file": "/c/server.crt"}
    assert flags(brought, "peer-cert-file") == {"peer-cert-file": "/c/peer.crt"}
    assert flags(brought, "peer-key-file") == {"peer-key-file": "/c/peer.key"}


def test_a_generated_clusters_trust_digest_is_the_ca_digest_as_before(tmp_path: Path) -> None:
    ca = ensure_ca(tmp_path, common_name="ca", certificates=ClusterSpec().certificates)
    cert, key = ca.pair()
    assert not byo_tls.is_brought(tmp_path)
    assert trust_of(tmp_path) == pki.trust_digest(cert.read_bytes(), key.read_bytes())


def test_a_ca_made_before_the_first_copy_goes_and_none_is_made_over_a_copy(tmp_path: Path) -> None:
    # A client asked for files while the user's directory was unusable: a CA was generated.
    certificates = ClusterSpec().certificates
    ensure_ca(tmp_path / "tls", common_name="ca", certificates=certificates)
    user_files(tmp_path / "my-tls")
    byo_tls.sync_copy(tmp_path / "my-tls", tmp_path / "tls", now=NOW)
    assert not (tmp_path / "tls" / "ca.key").exists() and byo_tls.is_brought(tmp_path / "tls")
    with pytest.raises(CertificatesRefused, match="holds certificates brought with secretRef"):
        ensure_ca(tmp_path / "tls", common_name="ca", certificates=certificates)
    assert byo_tls.read(tmp_path / "tls") == byo_tls.read(tmp_path / "my-tls")
