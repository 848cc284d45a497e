"""`etcd-supervisor decode-backup`: an object fetched from the store decoded by hand into the
plain snapshot, with the key file's current or older keys; a missing or wrong key, or a
damaged object, exits 1 naming the problem and leaves no half-written snapshot."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import pytest

from actors.backup.envelope import Encoder
from actors.backup.keys import key_ring_from
from supervisor.cli import main

OLD, NEW = os.urandom(32), os.urandom(32)


def stored(tmp_path: Path, data: bytes, key: bytes | None) -> Path:
    ring = key_ring_from({"key": base64.b64encode(key).decode()}, "test") if key else None
    encoder = Encoder(compress=True, key=ring.current() if ring else None)
    path = tmp_path / "object.db"
    with path.open("wb") as f:
        for i in range(0, len(data), 300_000):
            f.write(encoder.feed(data[i : i + 300_000]))
        f.write(encoder.finish())
    return path


def key_file(tmp_path: Path, **keys: bytes) -> str:
    path = tmp_path / "backup-key"
    path.write_text("".join(f"{name}={base64.b64encode(k).decode()}\n" for name, k in keys.items()))
    return str(path)


def test_an_object_encrypted_with_an_older_key_decodes_with_the_rotated_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = bytes(4096) + os.urandom(3 << 20) + b"etcd " * 200_000
    obj = stored(tmp_path, data, OLD)
    out = tmp_path / "snapshot.db"
    assert (
        main(["decode-backup", str(obj), str(out), "--key-file", key_file(tmp_path, key=NEW, old=OLD)]) == 0
    )
    assert out.read_bytes() == data
    assert hashlib.sha256(data).hexdigest() in capsys.readouterr().out


def test_plain_and_compressed_objects_need_no_key(tmp_path: Path) -> None:
    data = bytes(4096) + b"plain snapshot" * 1000
    (tmp_path / "plain.db").write_bytes(data)
    assert main(["decode-backup", str(tmp_path / "plain.db"), str(tmp_path / "a.db")]) == 0
    assert (tmp_path / "a.db").read_bytes() == data
    assert main(["decode-backup", str(stored(tmp_path, data, None)), str(tmp_path / "b.db")]) == 0
    assert (tmp_path / "b.db").read_bytes() == data


def test_a_wrong_key_or_a_damaged_object_is_named_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    obj = stored(tmp_path, os.urandom(2 << 20), OLD)
    out = tmp_path / "snapshot.db"
    assert main(["decode-backup", str(obj), str(out), "--key-file", key_file(tmp_path, key=NEW)]) == 1
    assert "BackupKeyMissing" in capsys.readouterr().err and not out.exists()
    assert main(["decode-backup", str(obj), str(out)]) == 1
    assert "BackupKeyMissing" in capsys.readouterr().err
    blob = bytearray(obj.read_bytes())
    blob[len(blob) // 2] ^= 1
    obj.write_bytes(bytes(blob))
    assert main(["decode-backup", str(obj), str(out), "--key-file", key_file(tmp_path, key=OLD)]) == 1
    assert "BackupDecryptFailed" in capsys.readouterr().err and not out.exists()
