"""Decoding a backup object by hand (`etcd-supervisor decode-backup`): a file fetched from the
store (with `aws s3 cp`, `gsutil cp`, or straight from a local store's directory) into the plain
etcd snapshot that `etcdutl snapshot restore` takes, for a restore without the supervisor.

Streams, a segment at a time, like the supervisor's own reads (actors/backup/encoded_store.py);
a plain object is copied as it is.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from actors.backup.envelope import HEADER_SIZE, SEGMENT, Decoder, is_envelope, parse_header
from actors.backup.keys import KeyRing, no_keys


def decode_file(source: Path, target: Path, ring: KeyRing | None) -> tuple[int, str]:
    """`source` decoded into `target`: the snapshot's size and sha256 (the metadata object's
    snapshotSizeBytes and snapshotSha256). Raises the named errors of actors.errors
    (BackupKeyMissing, BackupDecryptFailed, ...); `target` is removed when it fails."""
    digest, size = hashlib.sha256(), 0
    try:
        with source.open("rb") as src, target.open("wb") as out:
            head = src.read(HEADER_SIZE)
            if not is_envelope(head):
                out.write(head)
                digest.update(head)
                size += len(head)
                while chunk := src.read(SEGMENT):
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                return size, digest.hexdigest()
            header = parse_header(head, str(source))
            decoder = Decoder(header, ring or no_keys("no --key-file given"), str(source))
            decoder.push(head)
            while True:
                chunk = src.read(SEGMENT)
                decoder.push(chunk)
                while piece := decoder.take(SEGMENT):
                    out.write(piece)
                    digest.update(piece)
                    size += len(piece)
                if not chunk:
                    break
            decoder.finish()
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return size, digest.hexdigest()
