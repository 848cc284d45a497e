"""Incremental backups (spec.backup.deltaPeriod): the changes between full snapshots (pure).

A delta chunk holds every change of a contiguous range of revisions, in order: puts with their
value and lease (with the TTL that lease was granted with: actors/backup/leases.py), deletes.
Its key names the range it covers, `<namespace>/<name>/deltas/<from>-<to>.jsonl` (20-digit
revisions, so keys sort by revision); a range may hold revisions without any change (a
progress notification covered them). Chunks
follow each other without gaps: the next one starts at the previous one's `to + 1`, so a gap
in the store is a gap in the history, and a restore says so instead of replaying around it.

Restoring to revision T takes the newest snapshot at or below T (revision S), then replays the
changes of revisions S+1..T from the chunks that cover them.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from attrs import define, frozen

from actors.errors import EtcdError
from actors.model import ClusterRef

DELTAS = "deltas"
_CHUNK = re.compile(r"/deltas/(\d{20})-(\d{20})\.jsonl$")


@frozen
class Change:
    """One change of one key at one revision; `value` None: the key was deleted.

    A put with a lease carries the TTL the lease was granted with (`LEASE_GONE` in
    actors/backup/leases.py: the lease had gone already when the follower asked; None: not
    recorded, as in chunks written before leases were)."""

    revision: int
    key: bytes
    value: bytes | None
    lease: int = 0
    lease_ttl: int | None = None


@frozen
class ChangeBatch:
    """Changes in revision order; every change up to `revision` has been delivered."""

    changes: tuple[Change, ...]
    revision: int


class HistoryCompacted(EtcdError):
    """The history needed is compacted away: a full backup must start the deltas afresh."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"history compacted up to revision {compact_revision}")
        self.compact_revision = compact_revision


class HistoryStream(Protocol):
    """Batches in revision order. Waiting for the next one may be cancelled and started again
    without losing a batch (the follower cuts chunks at a period's end)."""

    def __aiter__(self) -> AsyncIterator[ChangeBatch]: ...

    async def request_progress(self) -> None:
        """Ask for a batch (possibly empty) that says how far the history has been delivered."""
        ...

    def move_to_another_member(self) -> str:
        """Give up the member serving the stream (it went silent) for another one, resuming
        right after the last delivered batch; returns the member given up."""
        ...


@runtime_checkable  # an admin that can follow history is one (history_of in actors/backup/services.py)
class HistorySource(Protocol):
    """Follows a cluster's whole keyspace from a revision on (the Watch RPC), across members."""

    def follow(
        self, endpoints: Sequence[str], start_revision: int
    ) -> AbstractAsyncContextManager[HistoryStream]: ...


@define
class Liveness:
    """When a quiet history stream is asked how far it got, and when it counts as dead.

    A stream that delivered nothing for `every` seconds is asked for progress (again each
    `every` while it stays quiet). One that delivered nothing at all, not even the answer to
    such a request, for `misses` times `every` is dead: a member frozen or cut off without its
    connection closing never ends the stream by itself."""

    every: float
    misses: int
    heard_at: float  # when the stream last delivered a batch (or was moved: a fresh start)
    asked_at: float = float("-inf")

    def heard(self, now: float) -> None:
        self.heard_at = now

    def asked(self, now: float) -> None:
        self.asked_at = now

    def next_look(self) -> float:
        return max(self.heard_at, self.asked_at) + self.every

    def dead(self, now: float) -> bool:
        return now - self.heard_at >= self.misses * self.every


@frozen
class ChunkRef:
    key: str
    first: int  # the first revision the chunk covers
    last: int  # the last revision it covers


def deltas_prefix(cluster: ClusterRef) -> str:
    return f"{cluster.namespace}/{cluster.name}/{DELTAS}/"


def chunk_key(cluster: ClusterRef, first: int, last: int) -> str:
    return f"{deltas_prefix(cluster)}{first:020d}-{last:020d}.jsonl"


def parse_chunk_key(key: str) -> ChunkRef | None:
    found = _CHUNK.search(key)
    if found is None:
        return None
    return ChunkRef(key, int(found.group(1)), int(found.group(2)))


def encode_chunk(changes: Iterable[Change]) -> bytes:
    lines = []
    for c in changes:
        record: dict[str, object] = {"rev": c.revision, "key": base64.b64encode(c.key).decode()}
        if c.value is None:
            record["delete"] = True
        else:
            record["value"] = base64.b64encode(c.value).decode()
            if c.lease:
                record["lease"] = c.lease
                if c.lease_ttl is not None:
                    record["ttl"] = c.lease_ttl
        lines.append(json.dumps(record, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode() if lines else b""


def decode_chunk(data: bytes) -> list[Change]:
    """The changes of a chunk; ValueError when it is not one."""
    out = []
    for line in data.decode().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        value = None if record.get("delete") else base64.b64decode(record["value"])
        ttl = record.get("ttl")
        out.append(
            Change(
                int(record["rev"]),
                base64.b64decode(record["key"]),
                value,
                int(record.get("lease", 0)),
                None if ttl is None else int(ttl),
            )
        )
    return out


def covered_to(chunks: Iterable[ChunkRef], since: int) -> int:
    """The last revision the chunks cover without a gap from `since + 1` on (`since` if none)."""
    reached = since
    for chunk in sorted(chunks, key=lambda c: c.first):
        if chunk.first > reached + 1:
            break
        reached = max(reached, chunk.last)
    return reached


def chunks_to_replay(chunks: Iterable[ChunkRef], snapshot_revision: int, target: int) -> list[ChunkRef]:
    """The chunks that hold revisions snapshot_revision+1..target, in order.

    ValueError naming the first revision no chunk holds, when the history has a gap there."""
    if target <= snapshot_revision:
        return []
    ordered = sorted(chunks, key=lambda c: c.first)
    needed = [c for c in ordered if c.last > snapshot_revision and c.first <= target]
    reached = snapshot_revision
    for chunk in needed:
        if chunk.first > reached + 1:
            break
        reached = max(reached, chunk.last)
    if reached < target:
        raise ValueError(
            f"no delta backup holds revision {reached + 1}: the history from the snapshot at revision"
            f" {snapshot_revision} reaches only revision {reached}"
        )
    return needed


def changes_up_to(changes: Iterable[Change], snapshot_revision: int, target: int) -> list[Change]:
    """The changes to replay onto a snapshot at `snapshot_revision` to reach `target`."""
    return [c for c in changes if snapshot_revision < c.revision <= target]
