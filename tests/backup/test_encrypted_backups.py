"""Encrypted, compressed backups of real etcd (spec.backup.encryption, spec.backup.compression),
locally with the key in a file next to the manifest: a missing key turns BackupHealthy False by
name; backups taken before and after a key rotation, and an old plain one, all restore to the
same HashKV as recorded; a wrong key or a damaged object fails verification and restore by name,
never a corrupt restore."""

from __future__ import annotations

import base64
import hashlib
import json
import os

import attrs
import pytest

from actors.backup.encoded_store import encoded
from actors.backup.envelope import is_envelope
from actors.backup.keys import key_id
from actors.errors import BackupDecryptFailed, BackupKeyMissing
from actors.model import BackupSpec, Compression, EncryptionSpec, LocalStore, RestoreSpec, StoreSpec
from supervisor.etcd.client import open_etcd_client
from supervisor.local.backups import LocalKeyFiles, local_backups, local_store_opener
from supervisor.local.scratch import ScratchVerifier
from tests.backup.test_restore import with_spec
from tests.chaos.lifecycle import open_local_supervisor, resource
from tests.harness.clock import fast_clock

OLD, NEW, OTHER = os.urandom(32), os.urandom(32), os.urandom(32)


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def condition(status, kind):
    return next((c for c in status.conditions if c.type == kind), None)


def newest(status):
    last = status.backup.last_successful_backup if status.backup else None
    return last.key if last and last.verified else None


async def test_encrypted_backups_restore_across_a_key_rotation_and_plain_ones_still_do(tmp_path):
    store = StoreSpec(local=LocalStore(str(tmp_path / "backups")))
    plain = BackupSpec(schedule="* * * * *", store=store, compression=Compression.NONE)
    sealed = attrs.evolve(plain, compression=Compression.ZSTD, encryption=EncryptionSpec("backup-key"))
    source = with_spec(resource("source", size=3), backup=plain)
    key_file = tmp_path / "backup-key"  # next to the manifest (tmp_path is the manifest's dir)
    clock = fast_clock()

    def children(runtime):
        scratch = tmp_path / "scratch"
        return [
            local_backups(runtime, manifest_dir=tmp_path, scratch_dir=scratch, clock=clock, wake_every=0.5)
        ]

    keys = LocalKeyFiles(tmp_path)
    stores = local_store_opener(tmp_path, {})
    async with open_local_supervisor(tmp_path / "state", children=children, stores=stores, keys=keys) as sup:
        await sup.fleet.apply([source])
        status = await sup.wait_healthy(source.ref, 3)
        written = {f"key-{i}".encode(): f"value-{i}".encode() * 20 for i in range(300)}
        async with open_etcd_client([m.client_url for m in status.members]) as etcd:
            for k, v in written.items():
                await etcd.put(k, v)

        # (1) An old-style plain backup.
        status = await sup.wait_for(
            source.ref,
            lambda s: newest(s) is not None and s.backup.last_successful_backup.revision > 300,
            timeout=60,
        )
        plain_key = newest(status)

        # (2) Encryption asked for, no key file yet: BackupHealthy False at once, by name.
        source = with_spec(source, backup=sealed)
        await sup.fleet.apply([source])
        status = await sup.wait_for(
            source.ref,
            lambda s: (condition(s, "BackupHealthy") or s).reason == "BackupKeyMissing",
            timeout=60,
        )
        missing = condition(status, "BackupHealthy")
        assert missing.status == "False" and str(key_file) in missing.message, missing

        # (3) The key written: encrypted, compressed backups from the next attempt on.
        key_file.write_text(f"key={b64(OLD)}\n")
        status = await sup.wait_for(source.ref, lambda s: newest(s) not in (None, plain_key), timeout=90)
        old_key = newest(status)
        assert condition(status, "BackupHealthy").status == "True"

        # (4) Rotation: a new `key`, the old one kept under another name.
        key_file.write_text(f"key={b64(NEW)}\nrotated-2026-11={b64(OLD)}\n")
        status = await sup.wait_for(
            source.ref,
            lambda s: (
                newest(s) not in (None, plain_key, old_key) and _key_id_of(tmp_path, newest(s)) == key_id(NEW)
            ),
            timeout=90,
        )
        new_key = newest(status)

        # (5) Each restores, checked against its recorded HashKV (RestoreVerified), with the
        # rotated key file; the plain one in place as before.
        restores = {
            name: with_spec(
                resource(name, size=1),
                backup=attrs.evolve(sealed, schedule=None),
                restore=RestoreSpec(store=store, key=key),
            )
            for name, key in (("from-plain", plain_key), ("from-old", old_key), ("from-new", new_key))
        }
        await sup.fleet.apply([source, *restores.values()])
        got = {}
        for name, restored in restores.items():
            status = await sup.wait_healthy(restored.ref, 1, timeout=120)
            async with open_etcd_client([m.client_url for m in status.members]) as etcd:
                got[name] = {kv.key: kv.value for kv in await etcd.range(b"key-", b"key.")}
            assert sup.recorder.reasons(restored.ref)[:2] == ["RestoreVerified", "RestoredFromBackup"], name

        # (6) The old key gone from the file: a backup it encrypted fails by name, nothing built.
        key_file.write_text(f"key={b64(OTHER)}\n")
        lost = with_spec(
            resource("lost-key", size=1),
            backup=attrs.evolve(sealed, schedule=None),
            restore=RestoreSpec(store=store, key=old_key),
        )
        await sup.fleet.apply([source, *restores.values(), lost])
        failed = await sup.wait_for(lost.ref, lambda s: s.phase.value == "Failed", timeout=60)

        # (7) Verification with the wrong key, and of a damaged object: refused by name.
        wrong = encoded(stores(store), source.ref, sealed, keys)
        verifier = ScratchVerifier(tmp_path / "scratch-check", sup.runtime.etcd_binary)
        with pytest.raises(BackupKeyMissing, match=key_id(NEW).hex()):
            await verifier.restored_hash(wrong.get_stream(new_key))
        key_file.write_text(f"key={b64(NEW)}\n")
        damaged = tmp_path / "backups" / new_key
        blob = bytearray(damaged.read_bytes())
        blob[len(blob) // 2] ^= 0x40
        damaged.write_bytes(bytes(blob))
        with pytest.raises(BackupDecryptFailed, match="does not authenticate"):
            await verifier.restored_hash(encoded(stores(store), source.ref, sealed, keys).get_stream(new_key))

    assert all(g == written for g in got.values()), {k: len(v) for k, v in got.items()}
    assert "BackupKeyMissing" in failed.message and key_id(OLD).hex() in failed.message, failed.message
    assert not (tmp_path / "state" / "default" / "lost-key" / "members").exists() or not list(
        (tmp_path / "state" / "default" / "lost-key" / "members").iterdir()
    )
    # What is stored: the plain backup as etcd sent it; the others compressed and encrypted,
    # their metadata naming the key by id and both hashes.
    backups = tmp_path / "backups"
    plain_meta = json.loads((backups / f"{plain_key}.json").read_text())
    assert not is_envelope((backups / plain_key).read_bytes()[:8])
    assert plain_meta["compression"] == "none" and plain_meta["encryption"] is None
    assert plain_meta["sha256"] == plain_meta["snapshotSha256"]
    for key, used in ((old_key, OLD), (new_key, NEW)):
        meta = json.loads((backups / f"{key}.json").read_text())
        assert meta["encryption"] == {"algorithm": "AES-256-GCM", "keyId": key_id(used).hex()}
        assert meta["compression"] == "zstd" and meta["format"] == "esbk/1"
        assert meta["sizeBytes"] < meta["snapshotSizeBytes"]
    meta = json.loads((backups / f"{old_key}.json").read_text())
    assert meta["sha256"] == hashlib.sha256((backups / old_key).read_bytes()).hexdigest()


def _key_id_of(tmp_path, key):
    meta = json.loads((tmp_path / "backups" / f"{key}.json").read_text())
    return bytes.fromhex(meta["encryption"]["keyId"]) if meta.get("encryption") else None
