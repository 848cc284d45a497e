"""Certificates for TLS clusters: one CA per cluster, a server/peer cert per member, a client cert.

Generated on first use and kept under the cluster's directory, so a restarted daemon (and the
etcd members it restarts) keep trusting each other. Leaves live as long as the spec's
`certificates.validity`; `LocalCertificates` (the CertificateStore the renewal child uses)
re-signs them in place before they expire, and carries out a CA rotation's phases
(actors/ca_rotation.py) on the same files.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from pathlib import Path

import trio

from actors.certificates import CertificateState, RotationRecord
from actors.errors import CertificatesRefused
from actors.model import CertificatesSpec, ClusterRef, IssuerRef
from supervisor import brought_tls, ca_material, pki
from supervisor.etcd.tls import TlsFiles
from supervisor.local import byo_tls
from supervisor.local.layout import ClusterLayout, StateLayout, write_file_atomically
from supervisor.material_store import MaterialStore

CLIENT = "client"  # the daemon's own client identity, in the cluster's tls/ directory
MEMBER_STEM = "member"  # each member's server/peer pair, in its own tls/ directory


def ensure_ca(tls_dir: Path, *, common_name: str, certificates: CertificatesSpec) -> TlsFiles:
    """The cluster's CA (cert is also the trust bundle), created on first use."""
    ca = TlsFiles(tls_dir / "ca.crt", tls_dir / "ca.crt", tls_dir / "ca.key")
    if all(path.exists() for path in ca.pair()):
        return ca
    if byo_tls.is_brought(tls_dir):  # a new CA here would replace the user's bundle
        raise CertificatesRefused(f"{tls_dir} holds certificates brought with secretRef: no CA is made there")
    lifetime = datetime.timedelta(seconds=certificates.ca_validity_seconds)
    _write_pair(ca, pki.new_ca(common_name, now=_now(), lifetime=lifetime))
    return ca


def seed_ca(tls_dir: Path, ca: pki.KeyPair) -> None:
    """An adopted cluster's CA (spec.adopt, supervisor/adopted_ca.py), written before anything
    is signed, so every leaf ensure_leaf makes is signed by it; one already there is kept."""
    files = TlsFiles(tls_dir / "ca.crt", tls_dir / "ca.crt", tls_dir / "ca.key")
    if not all(path.exists() for path in files.pair()):
        _write_pair(files, ca)


def ensure_leaf(
    ca: TlsFiles,
    directory: Path,
    *,
    stem: str,
    common_name: str,
    server: bool,
    certificates: CertificatesSpec,
) -> TlsFiles:
    """A cert signed by the CA, valid for the spec's validity. Member certs serve both roles:
    etcd presents them to clients and, as a client, to its peers, so they carry serverAuth and
    clientAuth. An existing pair is kept as it is: renewing is LocalCertificates'."""
    files = TlsFiles(ca.ca_file, directory / f"{stem}.crt", directory / f"{stem}.key")
    if all(path.exists() for path in files.pair()):
        return files
    # Members listen on loopback only in the local runtime.
    leaf = pki.issue(
        _issuer(ca),
        common_name,
        now=_now(),
        lifetime=datetime.timedelta(seconds=certificates.validity_seconds),
        dns=["localhost"] if server else [],
        ips=["127.0.0.1"] if server else [],
        server_auth=server,
        client_auth=True,
    )
    _write_pair(files, leaf)
    return files


class LocalCertificates(MaterialStore):
    """The CertificateStore of the local runtime: the files under each cluster's directory.

    Leaves are named `client` (the daemon's own) and by member. Every change (a renewal, a CA
    rotation's phase: supervisor/ca_material.py) replaces files one by one by a rename, in an
    order that a crash at any point leaves resumable: a new CA's files before the bundle that
    trusts it, re-signed leaves before the key that signed them, stale files last. etcd reads
    its pair from disk at every handshake and sees the old or the new certificate whole (keys
    never change), and `local env`'s paths stay the same.
    """

    follows_issuers = False  # issuerRef is Kubernetes-only: accepted, ignored, generated here

    def __init__(self, state_dir: Path, *, secrets_dir: Path | None = None) -> None:
        self._layout = StateLayout(state_dir)
        self._secrets_dir = secrets_dir  # where secretRef's directories are (the manifest's)

    async def read(self, cluster: ClusterRef) -> CertificateState | None:
        return await trio.to_thread.run_sync(self._read, self._layout.cluster(cluster))

    async def follow_source(self, cluster: ClusterRef, source: str | IssuerRef) -> None:
        """Certificates the user brings: copy <secrets dir>/<source>/ when it changed
        (supervisor/local/byo_tls.py)."""
        if isinstance(source, IssuerRef):  # not asked: follows_issuers is False
            raise CertificatesRefused(f"{source}: cert-manager issues certificates on Kubernetes only")
        if self._secrets_dir is None:
            raise CertificatesRefused(
                f"secretRef ({source}): this supervisor has no directory of Secrets (the manifest's)"
            )
        source_dir, tls_dir = self._secrets_dir / source, self._layout.cluster(cluster).tls_dir
        await trio.to_thread.run_sync(lambda: byo_tls.sync_copy(source_dir, tls_dir, now=_now()))

    async def write_record(self, cluster: ClusterRef, record: RotationRecord) -> None:
        layout = self._layout.cluster(cluster)
        await trio.to_thread.run_sync(_write_record, layout, record)

    async def _change(
        self,
        cluster: ClusterRef,
        change: Callable[[ca_material.Material], ca_material.Material],
        what: str,
        *,
        record: RotationRecord | None = None,
    ) -> None:
        layout = self._layout.cluster(cluster)

        def apply() -> None:
            try:
                before = _material(layout)
                _write_material(layout, before, change(before))
                if record is not None:
                    _write_record(layout, record)
            except (OSError, ValueError, KeyError) as e:
                raise CertificatesRefused(f"{what} of {layout.root}: {e}") from e

        await trio.to_thread.run_sync(apply)

    def _read(self, layout: ClusterLayout) -> CertificateState | None:
        if not (layout.tls_dir / ca_material.CA_CERT).exists():
            return None
        try:
            if byo_tls.is_brought(layout.tls_dir):
                return brought_tls.state(byo_tls.read(layout.tls_dir))
            return ca_material.state(_material(layout), _read_record(layout))
        except (OSError, ValueError, KeyError) as e:
            raise CertificatesRefused(f"cannot read the certificates of {layout.root}: {e}") from e


def _material(layout: ClusterLayout) -> ca_material.Material:
    tls = layout.tls_dir
    optional = {name: (tls / name).read_bytes() if (tls / name).exists() else None for name in _NEXT}
    return ca_material.Material(
        bundle=(tls / ca_material.CA_CERT).read_bytes(),
        signer_key=(tls / ca_material.CA_KEY).read_bytes(),
        leaves={name: path.read_bytes() for name, path in _leaves(layout).items()},
        next_cert=optional[ca_material.NEXT_CERT],
        next_key=optional[ca_material.NEXT_KEY],
    )


_NEXT = (ca_material.NEXT_CERT, ca_material.NEXT_KEY)


def _write_material(layout: ClusterLayout, before: ca_material.Material, after: ca_material.Material) -> None:
    """Write what changed, in the resumable order (see LocalCertificates)."""
    tls = layout.tls_dir
    if after.next_key is not None and after.next_key != before.next_key:
        write_file_atomically(tls / ca_material.NEXT_KEY, after.next_key, mode=0o600)
    if after.next_cert is not None and after.next_cert != before.next_cert:
        write_file_atomically(tls / ca_material.NEXT_CERT, after.next_cert, mode=0o644)
    paths = _leaves(layout)
    for name, pem in after.leaves.items():
        if pem != before.leaves.get(name):
            write_file_atomically(paths[name], pem, mode=0o644)
    if after.signer_key != before.signer_key:
        write_file_atomically(tls / ca_material.CA_KEY, after.signer_key, mode=0o600)
    if after.bundle != before.bundle:
        write_file_atomically(tls / ca_material.CA_CERT, after.bundle, mode=0o644)
    if after.next_key is None:
        for name in _NEXT:
            (tls / name).unlink(missing_ok=True)


RECORD_FILE = "rotation.json"


def _read_record(layout: ClusterLayout) -> RotationRecord:
    path = layout.tls_dir / RECORD_FILE
    if not path.exists():
        return RotationRecord()
    data = json.loads(path.read_text())
    return RotationRecord(
        handled_request=data.get("handledRequest"),
        begun_at=data.get("begunAt"),
        completed_at=data.get("completedAt"),
    )


def _write_record(layout: ClusterLayout, record: RotationRecord) -> None:
    data = {
        "handledRequest": record.handled_request,
        "begunAt": record.begun_at,
        "completedAt": record.completed_at,
    }
    write_file_atomically(layout.tls_dir / RECORD_FILE, json.dumps(data).encode(), mode=0o644)


def _leaves(layout: ClusterLayout) -> dict[str, Path]:
    """Leaf name -> its certificate file, for the pairs that exist."""
    found = {}
    if (layout.tls_dir / f"{CLIENT}.crt").exists():
        found[CLIENT] = layout.tls_dir / f"{CLIENT}.crt"
    if layout.members_dir.is_dir():
        for member in sorted(layout.members_dir.iterdir()):
            cert = layout.member(member.name).tls_dir / f"{MEMBER_STEM}.crt"
            if cert.exists():
                found[member.name] = cert
    return found


def trust_of(tls_dir: Path) -> str:
    """The trust digest of a cluster's material now: what a member started now trusts and is
    signed by (pki.trust_digest), or presents too for a copy of the user's (brought_tls.trust)."""
    if byo_tls.is_brought(tls_dir):
        return brought_tls.trust(byo_tls.read(tls_dir))
    return pki.trust_digest(
        (tls_dir / ca_material.CA_CERT).read_bytes(), (tls_dir / ca_material.CA_KEY).read_bytes()
    )


def _issuer(ca: TlsFiles) -> pki.KeyPair:
    """The CA that signs (during a CA rotation the bundle holds two)."""
    ca_cert, ca_key = ca.pair()
    return ca_material.Material(ca_cert.read_bytes(), ca_key.read_bytes(), {}).signer()


def _write_pair(files: TlsFiles, pair: pki.KeyPair) -> None:
    cert, key = files.pair()
    cert.parent.mkdir(parents=True, exist_ok=True)
    # Key first, and only readable by us; the cert's presence is what marks the pair complete.
    write_file_atomically(key, pair.key_pem(), mode=0o600)
    write_file_atomically(cert, pair.cert_pem(), mode=0o644)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
