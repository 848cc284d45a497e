"""A TLS cluster that demands client certificates."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import attrs
import pytest
from cryptography import x509

from actors.errors import EtcdUnavailable
from supervisor import pki
from supervisor.etcd import EtcdTlsError, TlsFiles, open_etcd_client
from supervisor.etcd.addresses import KNOWN, UNADDRESSED
from supervisor.etcd.admin import EtcdAdminAdapter
from supervisor.etcd.errors import EtcdConnectionError
from tests.harness.etcd import UNRESOLVABLE_NAME, EtcdBinaries, EtcdCluster, running_cluster


@pytest.fixture(scope="module")
def cluster(binaries: EtcdBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(binaries, tmp_path_factory.mktemp("tls"), size=1, tls=True) as cluster:
        yield cluster


async def test_client_certificate_is_required(cluster: EtcdCluster, asyncio_loop: None) -> None:
    assert cluster.tls is not None
    assert all(url.startswith("https://") for url in cluster.endpoints)
    without_cert = TlsFiles(ca_file=cluster.tls.ca)
    async with open_etcd_client(cluster.endpoints, tls=without_cert, call_timeout=5) as client:
        with pytest.raises(EtcdTlsError):
            await client.put(b"/tls/k", b"v")


async def test_untrusted_server_is_refused(cluster: EtcdCluster, asyncio_loop: None) -> None:
    assert cluster.tls is not None
    # The system CAs never signed the test CA's server certificate.
    no_ca = TlsFiles(cert_file=cluster.tls.client_cert, key_file=cluster.tls.client_key)
    async with open_etcd_client(cluster.endpoints, tls=no_ca) as client:
        with pytest.raises(EtcdTlsError):
            await client.get(b"/tls/k")


async def test_works_with_a_client_certificate(cluster: EtcdCluster, asyncio_loop: None) -> None:
    assert cluster.tls is not None
    files = cluster.tls
    tls = TlsFiles(ca_file=files.ca, cert_file=files.client_cert, key_file=files.client_key)
    async with open_etcd_client(cluster.endpoints, tls=tls) as client:
        await client.put(b"/tls/k", b"v")
        assert await client.get(b"/tls/k") == b"v"
        assert (await client.status(cluster.endpoints[0])).member_id


async def test_the_leader_reports_the_cluster_version_over_tls(
    cluster: EtcdCluster, asyncio_loop: None
) -> None:
    # etcd's HTTP /version, beside gRPC on the client URL, with the same client certificate.
    files = cluster.tls
    assert files is not None
    tls = TlsFiles(ca_file=files.ca, cert_file=files.client_cert, key_file=files.client_key)
    admin = EtcdAdminAdapter(tls=tls)
    try:
        health = await admin.member_health(cluster.endpoints[0])  # a one-member cluster: the leader
    finally:
        await admin.aclose()
    major, minor = health.version.split(".")[:2]
    assert health.cluster_version == f"{major}.{minor}.0"


async def test_snapshot_over_tls_needs_the_client_certificate(
    cluster: EtcdCluster, asyncio_loop: None
) -> None:
    # The snapshot has an HTTP/2 connection of its own (snapshot_stream): TLS, ALPN and the
    # client certificate there too.
    files = cluster.tls
    assert files is not None
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    # Checked against another name than the endpoint's host (127.0.0.1), as the operator
    # reaches a scratch pod by its IP: the certificate's "localhost".
    tls = TlsFiles(
        ca_file=files.ca, cert_file=files.client_cert, key_file=files.client_key, server_name="localhost"
    )
    async with open_etcd_client(cluster.endpoints, tls=tls) as client:
        await client.put(b"/tls/snap", b"v")
        result = await client.snapshot(sink, endpoint=cluster.endpoints[0])
    assert result.verified and result.size == sum(map(len, chunks)) > 0
    async with open_etcd_client(
        cluster.endpoints, tls=attrs.evolve(tls, server_name="elsewhere")
    ) as misnamed:
        with pytest.raises(EtcdTlsError):
            await misnamed.snapshot(sink, endpoint=cluster.endpoints[0])
    async with open_etcd_client(cluster.endpoints, tls=TlsFiles(ca_file=files.ca)) as without_cert:
        with pytest.raises(EtcdTlsError):
            await without_cert.snapshot(sink, endpoint=cluster.endpoints[0])
    no_ca = TlsFiles(cert_file=files.client_cert, key_file=files.client_key)
    async with open_etcd_client(cluster.endpoints, tls=no_ca) as untrusting:
        with pytest.raises(EtcdTlsError):
            await untrusting.snapshot(sink, endpoint=cluster.endpoints[0])


async def test_a_client_presents_its_renewed_certificate_without_being_reopened(
    cluster: EtcdCluster, asyncio_loop: None, tmp_path: Path
) -> None:
    """The supervisor's clients live as long as the cluster: a certificate renewed on disk (same
    key, new dates, replaced by a rename, supervisor/local/tls.py) is what their next
    connection presents. Here the client starts with an expired one, which etcd refuses."""
    files = cluster.tls
    assert files is not None
    ca = pki.KeyPair.from_pem(files.ca.read_bytes(), (files.ca.parent / "ca-key.pem").read_bytes())
    current = x509.load_pem_x509_certificate(files.client_cert.read_bytes())
    cert, key = tmp_path / "client.crt", tmp_path / "client.key"
    key.write_bytes(files.client_key.read_bytes())
    past = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    expired = pki.reissue(ca, current, now=past, lifetime=dt.timedelta(hours=1))
    cert.write_bytes(attrs.evolve(ca, cert=expired).cert_pem())
    tls = TlsFiles(ca_file=files.ca, cert_file=cert, key_file=key)
    async with open_etcd_client(cluster.endpoints, tls=tls, call_timeout=5) as client:
        # With TLS 1.3 the server checks a client's certificate after the client has finished
        # its handshake: the refusal arrives as the connection closing.
        with pytest.raises((EtcdTlsError, EtcdConnectionError)):
            await client.put(b"/tls/renewed", b"v")
        renewed = pki.reissue(ca, current, now=dt.datetime.now(dt.UTC), lifetime=dt.timedelta(hours=1))
        aside = tmp_path / ".client.crt.tmp"
        aside.write_bytes(attrs.evolve(ca, cert=renewed).cert_pem())
        os.replace(aside, cert)
        await client.put(b"/tls/renewed", b"v")
        assert await client.get(b"/tls/renewed") == b"v"


async def test_a_client_made_before_its_files_exist_takes_them_when_they_appear(
    cluster: EtcdCluster, asyncio_loop: None, tmp_path: Path
) -> None:
    """Certificates the user brings are copied only once their directory is usable
    (supervisor/local/byo_tls.py), after the cluster's admin was made: until then it trusts
    nothing (not the system's CAs) and presents nothing; then it connects without being remade."""
    files = cluster.tls
    assert files is not None
    tls = TlsFiles(
        ca_file=tmp_path / "ca.crt", cert_file=tmp_path / "client.crt", key_file=tmp_path / "client.key"
    )
    admin = EtcdAdminAdapter(tls=tls, call_timeout=5)
    try:
        with pytest.raises(EtcdUnavailable, match="TLS handshake failed"):
            await admin.member_list(cluster.endpoints)
        for source, target in ((files.client_key, tls.key_file), (files.client_cert, tls.cert_file)):
            assert target is not None
            target.write_bytes(source.read_bytes())
        (tmp_path / "ca.crt").write_bytes(files.ca.read_bytes())
        assert len(await admin.member_list(cluster.endpoints)) == 1
    finally:
        await admin.aclose()


async def test_a_member_name_no_dns_answers_is_dialed_at_the_address_the_runtime_knows(
    cluster: EtcdCluster, asyncio_loop: None
) -> None:
    """supervisor/etcd/addresses.py: a host the book knows is dialed at its address, both by the
    gRPC channel and the snapshot's own connection, its certificate checked against the name;
    forgotten, the name is resolved again (and here fails)."""
    files = cluster.tls
    assert files is not None
    port = urlsplit(cluster.endpoints[0]).port
    named = [f"https://{UNRESOLVABLE_NAME}:{port}"]
    tls = TlsFiles(ca_file=files.ca, cert_file=files.client_cert, key_file=files.client_key)
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    async with open_etcd_client(named, tls=tls, call_timeout=5) as client:
        with pytest.raises(EtcdConnectionError):
            await client.get(b"/tls/named")
        KNOWN.remember(UNRESOLVABLE_NAME, "127.0.0.1")
        try:
            await client.put(b"/tls/named", b"v")
            assert await client.get(b"/tls/named") == b"v"
            assert (await client.snapshot(sink, endpoint=named[0])).verified
        finally:
            KNOWN.forget(UNRESOLVABLE_NAME)
        with pytest.raises(EtcdConnectionError):
            await client.get(b"/tls/named")
        # A member known to have no address: refused at once, neither dialed nor resolved.
        KNOWN.remember(UNRESOLVABLE_NAME, UNADDRESSED)
        try:
            with pytest.raises(EtcdConnectionError, match="no address yet"):
                await client.get(b"/tls/named")
            with pytest.raises(EtcdConnectionError, match="no address yet"):
                await client.snapshot(sink, endpoint=named[0])
        finally:
            KNOWN.forget(UNRESOLVABLE_NAME)
    # The certificate is still checked against the name: one it does not carry is refused.
    other = "elsewhere.etcd-supervisor.invalid"
    KNOWN.remember(other, "127.0.0.1")
    try:
        async with open_etcd_client([f"https://{other}:{port}"], tls=tls, call_timeout=5) as misnamed:
            with pytest.raises(EtcdTlsError):
                await misnamed.get(b"/tls/named")
    finally:
        KNOWN.forget(other)
