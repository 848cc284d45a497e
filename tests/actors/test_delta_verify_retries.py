"""The chain verifier beside the delta follower, on the autojump clock with an in-memory store
and verifier (the scratch replay itself runs against real etcd in tests/backup/test_delta_verify.py):
a store that fails is tried again until the chain verifies, a hash that differs calls for a
full backup, and a chunk that is not one fails the chain instead of the actor."""

from __future__ import annotations

import json
from types import SimpleNamespace

import attrs
import trio

from actors.backup.delta_verify import ChainVerifier, VerifyAsk
from actors.backup.deltas import Change, chunk_key, encode_chunk
from actors.backup.records import KvHash
from actors.errors import StoreUnavailable
from actors.model import BackupSpec, LocalStore, StoreSpec
from actors.store_port import ObjectInfo
from tests.actors.world import REF
from tests.harness.poll import eventually

SNAPSHOT = "default/demo/snap-rev10.db"


@attrs.define
class FlakyStore:
    objects: dict[str, bytes]
    failures: int = 0  # the next `failures` lists fail

    async def list(self, prefix: str) -> list[ObjectInfo]:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("backups: the store did not answer")
        return [ObjectInfo(k, len(v), 0.0) for k, v in sorted(self.objects.items()) if k.startswith(prefix)]

    async def get_bytes(self, key: str) -> bytes:
        return self.objects[key]

    async def get_stream(self, key: str):
        yield self.objects[key]

    async def aclose(self) -> None:
        pass


@attrs.define
class HashOfChanges:
    """A verifier whose "replay" hashes the changes it is given (what a scratch member would)."""

    calls: int = 0

    async def replayed_hash(self, snapshot, changes, target, *, compact_to=0):
        self.calls += 1
        async for _ in snapshot:
            pass
        return KvHash(hash(tuple(changes)) & 0xFFFF, target, compact_to)


def objects_with(changes: list[Change], chunk: bytes | None = None) -> dict[str, bytes]:
    meta = {"verified": True, "revision": 10}
    return {
        SNAPSHOT: b"snapshot",
        f"{SNAPSHOT}.json": json.dumps(meta).encode(),
        chunk_key(REF, 11, 13): encode_chunk(changes) if chunk is None else chunk,
    }


def context_for(events: list):
    async def record(ref, *, reason, message, warning=False, measured=None):
        events.append((reason, message))

    backup = BackupSpec(schedule="0 * * * *", store=StoreSpec(local=LocalStore("b")), delta_period="1s")
    resource = SimpleNamespace(spec=SimpleNamespace(backup=backup))
    return SimpleNamespace(
        ref=REF,
        desired=lambda: SimpleNamespace(resource=resource),
        ports=SimpleNamespace(events=SimpleNamespace(record=record)),
    )


CHANGES = [Change(11, b"a", b"1"), Change(12, b"b", b"2"), Change(13, b"a", None)]


async def run_one(store, ask: VerifyAsk, until_reason: str) -> tuple[list, list[str]]:
    events: list = []
    broken: list[str] = []
    verifier = ChainVerifier(context_for(events), HashOfChanges(), lambda spec: store, broken.append)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(verifier.run)
        verifier.ask(ask)
        await eventually(
            lambda: any(reason == until_reason for reason, _ in events),
            within=3600,
            every=1,
            what=until_reason,
        )
        nursery.cancel_scope.cancel()
    return events, broken


async def test_a_failing_store_is_tried_again_until_the_chain_verifies(autojump_clock):
    store = FlakyStore(objects_with(CHANGES), failures=3)
    good = KvHash(hash(tuple(CHANGES)) & 0xFFFF, 13, 0)
    events, broken = await run_one(store, VerifyAsk(13, good, "m1"), "DeltaBackupVerified")
    assert [r for r, _ in events] == ["DeltaBackupFailed"] * 3 + ["DeltaBackupVerified"]
    assert "3 changes replayed" in events[-1][1] and not broken


async def test_a_different_hash_or_a_chunk_that_is_not_one_calls_for_a_full_backup(autojump_clock):
    source = KvHash(12345 ^ (hash(tuple(CHANGES)) & 0xFFFF), 13, 0)  # not what the chunks give
    events, broken = await run_one(
        FlakyStore(objects_with(CHANGES)), VerifyAsk(13, source, "m1"), "DeltaVerificationFailed"
    )
    (message,) = [m for r, m in events if r == "DeltaVerificationFailed"]
    assert f"but {source.hash} on m1" in message and "revision 13" in message
    assert broken == [message.rsplit(" in ", 1)[0]]

    torn = FlakyStore(objects_with(CHANGES, chunk=b'{"rev": 11, "key"\n'))
    events, broken = await run_one(torn, VerifyAsk(13, source, "m1"), "DeltaVerificationFailed")
    assert "is not a delta chunk" in broken[0]
