"""The delta follower's liveness rule, on the autojump clock: a watch whose member goes silent
without failing (frozen, or behind a network that drops packets) is moved to another member
after DEAD_AFTER quiet progress intervals, and resumes where it stopped, so the chunks stay
contiguous; a quiet cluster whose member answers progress requests is left alone.

The history source is in memory: the Watch RPC itself is tested against real etcd in
tests/etcd/test_watch.py, the whole follower in tests/backup/test_deltas.py."""

from __future__ import annotations

import itertools
from contextlib import asynccontextmanager

import attrs
import trio

from actors.backup.delta_actor import DEAD_AFTER, delta_child
from actors.backup.deltas import (
    Change,
    ChangeBatch,
    chunk_key,
    covered_to,
    decode_chunk,
    encode_chunk,
    parse_chunk_key,
)
from actors.backup.health import BackupReport
from actors.backup.ports import BackupPorts
from actors.errors import EtcdUnavailable
from actors.model import (
    BackupSpec,
    BackupStatus,
    ClusterResource,
    ClusterSpec,
    LastBackup,
    LocalStore,
    StoreSpec,
)
from actors.platform import open_supervisor
from actors.store_port import ObjectInfo, StoredObject
from tests.actors.world import REF, TIMING, MemoryWorld, platform
from tests.harness.poll import eventually

BASE = 10  # the verified snapshot the deltas start from
PERIOD = 1.0  # deltaPeriod: also the progress interval (shorter than PROGRESS_EVERY)


@attrs.define
class MemoryStore:
    objects: dict[str, bytes]

    async def put_bytes(self, key: str, data: bytes) -> StoredObject:
        self.objects[key] = data
        return StoredObject(key, len(data), "")

    async def list(self, prefix: str) -> list[ObjectInfo]:
        return [ObjectInfo(k, len(v), 0.0) for k, v in sorted(self.objects.items()) if k.startswith(prefix)]

    async def aclose(self) -> None:
        pass


@attrs.define
class History:
    """A cluster's history as the follower's watch sees it, member by member. A frozen member
    keeps its stream open and delivers nothing, not even progress answers."""

    changes: list[Change] = attrs.field(factory=list)
    frozen: set[str] = attrs.field(factory=set)
    streams: list[Stream] = attrs.field(factory=list)
    contexts: list = attrs.field(factory=list)

    @property
    def revision(self) -> int:
        return self.changes[-1].revision if self.changes else BASE

    def write(self, count: int) -> None:
        for _ in range(count):
            revision = self.revision + 1
            self.changes.append(Change(revision, b"k%d" % (revision % 7), b"v%d" % revision))

    down: bool = False  # no member answers: every watch fails at once

    @asynccontextmanager
    async def follow(self, endpoints, start_revision):
        if self.down:
            raise EtcdUnavailable("no member answers")
        stream = Stream(self, list(endpoints), endpoints[0], start_revision - 1)
        self.streams.append(stream)
        yield stream


@attrs.define(eq=False)
class Stream:
    history: History
    endpoints: list[str]
    member: str
    delivered: int
    progress_asked: bool = False
    moves: list[tuple[float, str]] = attrs.field(factory=list)  # (when, member left)
    progress_answers: int = 0

    def __aiter__(self):
        return self

    async def __anext__(self) -> ChangeBatch:
        while True:
            if self.member not in self.history.frozen:
                new = tuple(c for c in self.history.changes if c.revision > self.delivered)
                if new:
                    self.delivered = new[-1].revision
                    return ChangeBatch(new, self.delivered)
                if self.progress_asked:
                    self.progress_asked = False
                    self.progress_answers += 1
                    return ChangeBatch((), self.delivered)  # nothing new: the same revision
            await trio.sleep(0.1)

    async def request_progress(self) -> None:
        self.progress_asked = True  # a frozen member never answers it

    def move_to_another_member(self) -> str:
        left = self.member
        self.member = self.endpoints[(self.endpoints.index(left) + 1) % len(self.endpoints)]
        self.progress_asked = False
        self.moves.append((trio.current_time(), left))
        return left


def stored(objects: dict[str, bytes]) -> tuple[list, list[Change]]:
    refs = sorted((r for k in objects if (r := parse_chunk_key(k))), key=lambda r: r.first)
    return refs, [c for r in refs for c in decode_chunk(objects[r.key])]


@asynccontextmanager
async def following(world: MemoryWorld, history: History, objects: dict[str, bytes]):
    """A fleet of one 3-member cluster with deltaPeriod, its verified snapshot at BASE."""
    verified = LastBackup("default/demo/snap.db", BASE, 1, verified=True, completion_time=0.0)

    def history_for(context):
        context.reports.backup = BackupReport(BackupStatus(last_successful_backup=verified))
        history.contexts.append(context)
        return history

    backup_ports = BackupPorts(lambda spec: MemoryStore(objects), verifier=None)
    store = StoreSpec(local=LocalStore("backups"))
    backup = BackupSpec(schedule="0 * * * *", store=store, delta_period=f"{PERIOD:.0f}s")
    spec = ClusterSpec(size=3, tls_enabled=False, backup=backup)
    async with open_supervisor(
        platform(world), timing=TIMING, children=[delta_child(backup_ports, history_for)]
    ) as fleet:
        await fleet.apply([ClusterResource(REF, spec)])
        yield


async def test_a_silent_member_is_left_for_another_and_a_quiet_cluster_is_not(autojump_clock):
    world, history, objects = MemoryWorld(), History(), {}
    async with following(world, history, objects):
        history.write(20)
        await eventually(
            lambda: covered_to(stored(objects)[0], BASE) == history.revision,
            within=60,
            what="deltas cover the history",
        )
        (stream,) = history.streams

        # The member serving the watch freezes: its stream neither fails nor delivers.
        frozen_at = trio.current_time()
        history.frozen.add(stream.member)
        history.write(30)
        await eventually(
            lambda: covered_to(stored(objects)[0], BASE) == history.revision,
            within=60,
            what="deltas cover the history",
        )
        ((moved_at, left),) = stream.moves
        assert left in history.frozen and stream.member not in history.frozen
        # Moved once nothing was heard for DEAD_AFTER progress intervals (plus one to notice).
        assert moved_at - frozen_at <= (DEAD_AFTER + 1) * PERIOD

        # A quiet cluster: every progress request is answered at the same revision, which
        # keeps the watch where it is (no move, no reopened watch, no failure, no new chunk).
        chunks = len(objects)
        answers = stream.progress_answers
        await trio.sleep(120)
        assert stream.progress_answers >= answers + 100 // PERIOD
        assert len(stream.moves) == 1 and history.streams == [stream]
        assert len(objects) == chunks

    refs, changes = stored(objects)
    assert [c.revision for c in changes] == list(range(BASE + 1, history.revision + 1))
    assert changes == history.changes  # each change once, in order, across the move
    assert all(b.first == a.last + 1 for a, b in itertools.pairwise(refs))
    assert not [e for e in world.events if e[1] == "DeltaBackupFailed"]


async def test_chunks_stored_before_a_restart_count_for_a_recovery_while_no_member_answers(autojump_clock):
    # A daemon restarted after losing every member: the chunks an earlier one wrote are in the
    # store, the watch cannot start, and a recovery from backup must still reach their end.
    world, history, objects = MemoryWorld(), History(down=True), {}
    history.write(25)
    for first, last in ((BASE + 1, 20), (21, 25)):
        objects[chunk_key(REF, first, last)] = encode_chunk(
            c for c in history.changes if first <= c.revision <= last
        )
    objects[chunk_key(REF, 27, 30)] = b""  # after a gap: not reachable from the snapshot
    async with following(world, history, objects):
        await eventually(
            lambda: bool(history.contexts) and history.contexts[0].reports.deltas_reach > 0,
            within=60,
            what="the deltas reach reported",
        )
        assert history.contexts[0].reports.deltas_reach == 25
        assert not history.streams
