"""Certificates the user brings (secretRef) on real etcd, locally: a directory next to the
manifest. The cluster forms on them (each listener serves the user's certificate for it), the
user's renewal is rolled out one member at a time, each member restarted once, and a broken
directory is reported naming the file while the members keep serving on the last good copy."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import trio
from cryptography import x509

from actors.model import ClusterRef, ClusterResource, ClusterSpec, ClusterStatus
from supervisor import pki
from supervisor.etcd import EtcdClient, TlsFiles
from tests.chaos.lifecycle import LocalSupervisor, is_healthy, open_local_supervisor
from tests.harness.procs import etcd_pids_under
from tests.harness.served_cert import served_certificate

DEMO = ClusterResource(
    ClusterRef("default", "demo"), ClusterSpec(size=3, tls_enabled=True, tls_secret="my-tls")
)
LIFE = dt.timedelta(days=365)  # beyond renewBefore (30 days by default)


def write_leaves(directory: Path, ca: pki.KeyPair) -> dict[str, pki.KeyPair]:
    """The user's directory for a local cluster: leaves naming 127.0.0.1, signed by `ca`."""
    now = dt.datetime.now(dt.UTC)
    loopback = {"dns": ["localhost"], "ips": ["127.0.0.1"]}
    leaves = {
        "server": pki.issue(
            ca, "user server", now=now, lifetime=LIFE, server_auth=True, client_auth=False, **loopback
        ),
        "peer": pki.issue(
            ca, "user peer", now=now, lifetime=LIFE, server_auth=True, client_auth=True, **loopback
        ),
        "client": pki.issue(ca, "user client", now=now, lifetime=LIFE, server_auth=False, client_auth=True),
    }
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ca.crt").write_bytes(ca.cert_pem())
    for name, pair in leaves.items():
        (directory / f"{name}.key").write_bytes(pair.key_pem())
        (directory / f"{name}.crt").write_bytes(pair.cert_pem())
    return leaves


def condition(status: ClusterStatus, kind: str = "CertificatesValid") -> tuple[str, str]:
    found = {c.type: c for c in status.conditions}.get(kind)
    return (found.status, found.message) if found is not None else ("", "")


def serial(pair: pki.KeyPair) -> int:
    return x509.load_pem_x509_certificate(pair.cert_pem()).serial_number


def served_serials(status: ClusterStatus, tls: TlsFiles) -> tuple[set[int], set[int]]:
    """The serials every member's client and peer listeners present to a new handshake."""

    def at(url: str) -> int:
        host, port = url.removeprefix("https://").rsplit(":", 1)
        return served_certificate(
            host, int(port), *(p for p in (tls.ca_file, *tls.pair()) if p)
        ).serial_number

    return {at(m.client_url) for m in status.members}, {at(m.peer_url) for m in status.members}


async def put_and_get(urls: list[str], tls: TlsFiles, key: bytes) -> bytes | None:
    etcd = EtcdClient(urls, tls=tls)
    try:
        await etcd.put(key, b"served on the user's certificates")
        return await etcd.get(key)
    finally:
        await etcd.aclose()


def failures(sup: LocalSupervisor) -> list[str]:
    return [message for _, reason, message in sup.recorder.events if reason == "CertificatesRenewalFailed"]


def note_pids(status: ClusterStatus | None, seen: dict[str, set[int]]) -> None:
    for member in status.members if status else ():
        if member.pid is not None:
            seen.setdefault(member.name, set()).add(member.pid)


async def record_pids(sup: LocalSupervisor, ref: ClusterRef, seen: dict[str, set[int]]) -> None:
    """Every process id each member had, as the status shows them: how many times each restarted.
    Polled, as a status may change more than once between two wake-ups of a wait."""
    while True:
        note_pids(sup.recorder.statuses.get(ref), seen)
        await trio.sleep(0.05)


def restarted_once_each(seen: dict[str, set[int]]):
    """A wait's predicate: healthy, every member seen with two process ids. The status it is
    given is noted first: it may be the last change, which the poll has not seen yet."""

    def predicate(status: ClusterStatus) -> bool:
        note_pids(status, seen)
        return is_healthy(status, 3) and all(len(seen.get(m.name, ())) >= 2 for m in status.members)

    return predicate


async def test_a_users_directory_serves_its_renewal_rolls_out_and_a_broken_one_is_reported(tmp_path):
    secrets = tmp_path / "secrets"
    source = secrets / "my-tls"
    ca = pki.new_ca("user ca", now=dt.datetime.now(dt.UTC), lifetime=10 * LIFE)
    first = write_leaves(source, ca)
    async with open_local_supervisor(tmp_path / "state", secrets_dir=secrets) as sup:
        await sup.fleet.apply([DEMO])
        status = await sup.wait_for(
            DEMO.ref, lambda s: is_healthy(s, 3) and condition(s)[0] == "True", timeout=90
        )
        assert condition(status)[1] == "from Secret my-tls"
        # The supervisor's client is the user's client pair; each listener serves the user's
        # certificate for it.
        tls = sup.runtime.client_tls_files(DEMO.ref)
        assert tls.cert_file is not None and tls.cert_file.read_bytes() == first["client"].cert_pem()
        assert served_serials(status, tls) == ({serial(first["server"])}, {serial(first["peer"])})
        urls = [m.client_url for m in status.members]
        assert await put_and_get(urls, tls, b"kept") == b"served on the user's certificates"
        assert not (tmp_path / "state" / "default" / "demo" / "tls" / "ca.key").exists()  # nothing generated

        # The user renews their leaves in the directory (same CA): each member restarts once.
        seen: dict[str, set[int]] = {m.name: {m.pid} for m in status.members if m.pid is not None}
        async with trio.open_nursery() as nursery:
            nursery.start_soon(record_pids, sup, DEMO.ref, seen)
            renewed = write_leaves(source, ca)
            status = await sup.wait_for(DEMO.ref, restarted_once_each(seen), timeout=120)
            await trio.sleep(3)  # a member restarted twice would show by now
            nursery.cancel_scope.cancel()
        assert {name: len(pids) for name, pids in seen.items()} == {m.name: 2 for m in status.members}
        tls = sup.runtime.client_tls_files(DEMO.ref)
        assert served_serials(status, tls) == ({serial(renewed["server"])}, {serial(renewed["peer"])})
        urls = [m.client_url for m in status.members]
        assert await put_and_get(urls, tls, b"kept") == b"served on the user's certificates"

        # A broken edit (peer.key from another pair) is reported naming the file; nothing restarts.
        pids = {m.name: m.pid for m in status.members}
        (source / "peer.key").write_bytes(renewed["server"].key_pem())
        status = await sup.wait_for(DEMO.ref, lambda s: condition(s)[0] == "False", timeout=30)
        assert "peer.key is not the key of peer.crt" in condition(status)[1]
        assert str(source) in condition(status)[1]
        assert any("peer.key is not the key of peer.crt" in message for message in failures(sup))
        await trio.sleep(3)
        status = sup.recorder.statuses[DEMO.ref]
        assert is_healthy(status, 3) and {m.name: m.pid for m in status.members} == pids
        assert await put_and_get(urls, tls, b"still") == b"served on the user's certificates"
        assert served_serials(status, tls) == ({serial(renewed["server"])}, {serial(renewed["peer"])})
    assert etcd_pids_under(tmp_path) == []


async def test_a_directory_broken_from_the_start_starts_no_member_until_it_is_fixed(tmp_path):
    secrets = tmp_path / "secrets"
    ca = pki.new_ca("user ca", now=dt.datetime.now(dt.UTC), lifetime=10 * LIFE)
    good = write_leaves(secrets / "my-tls", ca)
    (secrets / "my-tls" / "client.key").unlink()
    async with open_local_supervisor(tmp_path / "state", secrets_dir=secrets) as sup:
        await sup.fleet.apply([DEMO])
        # No copy was ever made: no dates to report (status.tls), the refusal said all the same.
        refusal = f"secretRef: {secrets / 'my-tls'}: missing client.key"
        status = await sup.wait_for(DEMO.ref, lambda s: condition(s)[0] == "False", timeout=30)
        assert condition(status)[1] == refusal and status.tls is None
        assert refusal in failures(sup)
        await trio.sleep(3)
        assert etcd_pids_under(tmp_path) == []  # no member runs on half the user's material
        assert not (tmp_path / "state" / "default" / "demo" / "tls" / "ca.key").exists()

        (secrets / "my-tls" / "client.key").write_bytes(good["client"].key_pem())
        status = await sup.wait_for(
            DEMO.ref, lambda s: is_healthy(s, 3) and condition(s)[0] == "True", timeout=90
        )
        tls = sup.runtime.client_tls_files(DEMO.ref)
        assert served_serials(status, tls) == ({serial(good["server"])}, {serial(good["peer"])})
    assert etcd_pids_under(tmp_path) == []


async def test_a_new_supervisor_keeps_the_members_running_on_the_users_certificates(tmp_path):
    # The copy, its trust digest and the members' command lines are the same for the next
    # supervisor: nothing to roll, no restart.
    secrets = tmp_path / "secrets"
    first = write_leaves(
        secrets / "my-tls", pki.new_ca("user ca", now=dt.datetime.now(dt.UTC), lifetime=LIFE)
    )
    async with open_local_supervisor(
        tmp_path / "state", secrets_dir=secrets, leave_members_running=True
    ) as sup:
        await sup.fleet.apply([DEMO])
        status = await sup.wait_for(
            DEMO.ref, lambda s: is_healthy(s, 3) and condition(s)[0] == "True", timeout=90
        )
        pids = {m.name: m.pid for m in status.members}
    async with open_local_supervisor(tmp_path / "state", secrets_dir=secrets) as sup:
        await sup.fleet.apply([DEMO])
        status = await sup.wait_for(
            DEMO.ref, lambda s: is_healthy(s, 3) and condition(s)[0] == "True", timeout=60
        )
        await trio.sleep(3)
        status = sup.recorder.statuses[DEMO.ref]
        assert {m.name: m.pid for m in status.members} == pids
        tls = sup.runtime.client_tls_files(DEMO.ref)
        assert served_serials(status, tls) == ({serial(first["server"])}, {serial(first["peer"])})
    assert etcd_pids_under(tmp_path) == []
