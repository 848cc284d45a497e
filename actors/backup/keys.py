"""Backup encryption keys (pure): a key ring read from a Secret's or a key file's values.

`key` is the current key, the one new objects are encrypted with; every other name holds an
older key, kept so that the objects it encrypted still decrypt (rotation: put the new key
under `key`, the old one under any other name). Each value is the base64 of 32 bytes.

Objects record a key id, never the key: the first 8 bytes of SHA-256 over a fixed label and
the key, so the id tells which key to use without revealing anything of it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping

from attrs import field, frozen

from actors.errors import BackupKeyInvalid, BackupKeyMissing

CURRENT = "key"  # the name of the key that encrypts
KEY_BYTES = 32  # AES-256
KEY_ID_BYTES = 8
_ID_LABEL = b"etcd-supervisor backup key id v1\x00"


def key_id(key: bytes) -> bytes:
    return hashlib.sha256(_ID_LABEL + key).digest()[:KEY_ID_BYTES]


@frozen
class BackupKey:
    name: str  # its name in the Secret or file
    key: bytes = field(repr=False)

    @property
    def id(self) -> bytes:
        return key_id(self.key)


@frozen
class KeyRing:
    """The keys of one Secret or file. `where` names it in every error."""

    where: str
    keys: tuple[BackupKey, ...] = ()

    def current(self) -> BackupKey:
        """The key new objects are encrypted with; BackupKeyMissing when there is none."""
        for k in self.keys:
            if k.name == CURRENT:
                return k
        raise BackupKeyMissing(f"{self.where} has no {CURRENT!r}: the key new backups are encrypted with")

    def by_id(self, wanted: bytes, what: str) -> BackupKey:
        """The key whose id is `wanted` (an object's, `what` naming it); BackupKeyMissing
        naming the id and the ids there are when none is."""
        for k in self.keys:
            if k.id == wanted:
                return k
        have = ", ".join(f"{k.name}={k.id.hex()}" for k in self.keys) or "none"
        raise BackupKeyMissing(
            f"{what} is encrypted with key id {wanted.hex()}, which is not among the keys of "
            f"{self.where} (ids: {have}): restore the old key under any name other than {CURRENT!r}"
        )


def key_ring_from(values: Mapping[str, str], where: str) -> KeyRing:
    """The keys in a Secret's or a file's NAME=VALUE pairs; BackupKeyInvalid naming the first
    value that is not the base64 of 32 bytes."""
    keys = []
    for name, text in sorted(values.items(), key=lambda item: (item[0] != CURRENT, item[0])):
        try:
            key = base64.b64decode(text.strip(), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BackupKeyInvalid(f"{where}: {name!r} is not base64 ({exc})") from exc
        if len(key) != KEY_BYTES:
            raise BackupKeyInvalid(
                f"{where}: {name!r} is {len(key)} bytes, an AES-256 key is {KEY_BYTES} "
                "(make one with: head -c 32 /dev/urandom | base64)"
            )
        keys.append(BackupKey(name, key))
    return KeyRing(where, tuple(keys))


def no_keys(why: str) -> KeyRing:
    """A ring without keys: plain and merely compressed objects still read; `why` says where
    keys would have come from in the error an encrypted one gets."""
    return KeyRing(why)
