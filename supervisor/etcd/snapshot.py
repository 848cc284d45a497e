"""Running digests over a snapshot stream, and the check of etcd's trailing checksum.

etcd appends the sha256 of the database to the end of the snapshot stream (the last 32
bytes). Checking it on the fly means holding back the most recent 32 bytes until we know
whether more data follows, while every byte still goes to the sink unchanged.
"""

from __future__ import annotations

import hashlib

from .records import SnapshotResult

SHA256_SIZE = 32


class SnapshotDigest:
    def __init__(self) -> None:
        # Only the payload is hashed as it streams; the hash of the whole stream is that state
        # continued with the held-back tail, which saves a second pass over every byte.
        self._payload = hashlib.sha256()  # of everything but the trailing checksum
        self._held_back = b""
        self.size = 0

    def update(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if len(chunk) >= SHA256_SIZE:
            # Cheap path for the usual large chunk: no copy of the chunk itself.
            self._payload.update(self._held_back)
            self._payload.update(memoryview(chunk)[:-SHA256_SIZE])
            self._held_back = chunk[-SHA256_SIZE:]
        else:
            joined = self._held_back + chunk
            self._payload.update(joined[:-SHA256_SIZE])
            self._held_back = joined[-SHA256_SIZE:]

    @property
    def verified(self) -> bool:
        return len(self._held_back) == SHA256_SIZE and self._payload.digest() == self._held_back

    def whole_sha256(self) -> str:
        whole = self._payload.copy()
        whole.update(self._held_back)
        return whole.hexdigest()

    def result(self, *, revision: int = 0, endpoint: str = "") -> SnapshotResult:
        return SnapshotResult(
            size=self.size,
            sha256=self.whole_sha256(),
            verified=self.verified,
            revision=revision,
            endpoint=endpoint,
        )
