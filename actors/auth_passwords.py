"""Which managed users' passwords differ from their source (spec.security.auth users with a
passwordSecret), though etcd never returns a password. Pure: no I/O, no event loop.

The supervisor records what it applied, never the password itself:

- Durably, in etcd itself: the key RECORD_PREFIX + the user's name holds a salted scrypt digest
  of the password, written right after each UserAdd or UserChangePassword that set it (a
  supervisor stopped in between applies it once more at its next look: idempotent). Kept
  there rather than in the state directory or a Kubernetes object because the record then
  goes wherever etcd's auth store goes: a restore from a backup brings back the passwords of
  that time and their records together, so the next look sees the source differ and applies
  it, where a record kept beside would claim the newer password and miss the change. It is
  also the same in both modes and needs no RBAC. The digest is salted and slow (scrypt, as
  costly to guess from as etcd's own bcrypt hash, which sits in the same backups); the key is
  readable only by root users once auth is on.
- In memory (PasswordBook, held by the auth child): a SHA-256 of each password known to be in
  etcd, so each look compares cheaply; scrypt runs once per user after a start (the record
  read) and once per change.

So a restarted supervisor neither misses a change (the record says which password it set) nor
resets every password (the record matches). A user without a record (made before records
were kept, or by hand and then named in the spec) gets its source password once. A password
changed in etcd by hand is not noticed: etcd says nothing of it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

RECORD_PREFIX = "etcd-supervisor/password-digest/"

# scrypt's cost: 16 MiB and some 30 ms a digest, the parameters kept in each record.
_N, _R, _P = 2**14, 8, 1


def record_key(user: str) -> bytes:
    return (RECORD_PREFIX + user).encode()


def new_record(password: str, salt: bytes) -> str:
    """The record of `password`: "scrypt$n$r$p$salt$digest" (base64), never the password."""
    digest = _scrypt(password, salt, _N, _R, _P)
    return f"scrypt${_N}${_R}${_P}${_b64(salt)}${_b64(digest)}"


def matches(record: str, password: str) -> bool:
    """Whether `record` was made of `password`; False for a record not of this form."""
    try:
        kind, n, r, p, salt, digest = record.split("$")
        if kind != "scrypt":
            return False
        found = _scrypt(password, base64.b64decode(salt), int(n), int(r), int(p))
        return hmac.compare_digest(found, base64.b64decode(digest))
    except ValueError:  # malformed, or parameters scrypt refuses
        return False


class PasswordBook:
    """The auth child's memory: which password each user is known to hold in etcd, as a SHA-256."""

    def __init__(self) -> None:
        self._held: dict[str, bytes] = {}

    def known(self, user: str, password: str) -> bool:
        held = self._held.get(user)
        return held is not None and hmac.compare_digest(held, _fingerprint(password))

    def learn(self, user: str, password: str) -> None:
        self._held[user] = _fingerprint(password)

    def forget(self, user: str) -> None:
        self._held.pop(user, None)


def _fingerprint(password: str) -> bytes:
    return hashlib.sha256(password.encode()).digest()


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=32)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
