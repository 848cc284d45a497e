"""Verifying delta backups as they are written (spec.backup.deltaPeriod with verify on).

What is verified is the chain a recovery would use: the newest verified snapshot and every
stored chunk after it up to the reach L, replayed into a scratch member exactly as a restore to
L does (actors/backup/point_in_time.py picks the pieces, the verifier port replays them). The
scratch's HashKV at L must equal the source cluster's HashKV at L, asked from a healthy member
right after the chunk reaching L is written, while L is not compacted away there. HashKV covers
every revision after the compaction, so the scratch's history is compacted as far as the
source's before hashing; a source compacted past L already, or one whose compaction is behind
the snapshot's, leaves nothing to compare: the verification is skipped, with a note.

When (`verification_due`, pure): after the first chunk that follows each new verified full
snapshot (a new chain's start is proven at once), then at most every VERIFY_EVERY while new
chunks arrive (the last one before a quiet spell too, once its time comes). A scratch restore
costs seconds (about a minute per GiB of data), so verifying every chunk would cost more than
following the history; ten minutes apart keeps it to a few percent of a core, and a chain broken
at rest is found within ten minutes.

It runs beside the follower (`ChainVerifier.run`), so a long replay never holds the watch up; a
request made while one runs waits, and a newer one replaces it. A chain that does not verify
(the hashes differ, a gap, a chunk that does not decode or replay) calls `on_broken`: the
follower takes a full backup at once and the deltas start again from it, so a recovery never
relies on a chain known to be wrong. A store or scratch member that fails is tried again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio
from attrs import define, field, frozen

from actors.backup.point_in_time import PointInTime, plan_chain
from actors.backup.ports import SnapshotVerifier
from actors.backup.records import KvHash
from actors.cluster_context import ClusterContext
from actors.errors import RestoreFailed
from actors.model import StoreSpec
from actors.store_port import ObjectStore
from supervisor.backoff import Backoff

log = logging.getLogger(__name__)

# At most this often (seconds) while new chunks arrive, after the first chunk on a new base.
VERIFY_EVERY = 600.0
RETRY = Backoff(initial=5.0, maximum=300.0, multiplier=2.0, jitter=0.1)


@frozen
class Checkpoint:
    """The last verification asked for: the follower's base then, the reach L, when (trio time)."""

    base: int
    reach: int
    at: float


def verification_due(last: Checkpoint | None, base: int, reach: int, now: float, every: float) -> bool:
    """Whether the chunk just written (reaching `reach`, on the verified snapshot `base`) should
    have its chain verified: the first chunk on a new base always, later ones `every` apart."""
    if last is None or base > last.base:
        return True
    return reach > last.reach and now - last.at >= every


@frozen
class VerifyAsk:
    """A chain to verify: up to `reach`, whose HashKV on the source `member` is `source`."""

    reach: int
    source: KvHash
    member: str


@frozen
class Verdict:
    """How a verification ended: passed, or failed, or None (nothing to compare), and why."""

    passed: bool | None
    message: str


def judge(ask: VerifyAsk, restored: KvHash, plan: PointInTime) -> Verdict:
    """The scratch's hash against the source's (pure)."""
    chain = f"{plan.snapshot_key} (revision {plan.snapshot_revision}) + {plan.chunks} chunks"
    at = ask.reach
    if restored.compact_revision != ask.source.compact_revision:
        return Verdict(
            None,
            f"the deltas to revision {at} are not verified: the source's history is compacted to"
            f" revision {ask.source.compact_revision}, the snapshot's to {restored.compact_revision},"
            " so their hashes cannot be compared",
        )
    if restored.hash != ask.source.hash:
        return Verdict(
            False,
            f"the deltas to revision {at} do not replay to the source's state: HashKV at revision"
            f" {at} is {restored.hash} replayed from {chain} but {ask.source.hash} on {ask.member}",
        )
    return Verdict(
        True,
        f"the deltas to revision {at} replay to the source's state: {chain}, {len(plan.changes)}"
        f" changes replayed, HashKV {restored.hash} at revision {at}",
    )


@define
class ChainVerifier:
    """Verifies the chains the follower asks for, one at a time, beside it."""

    context: ClusterContext
    verifier: SnapshotVerifier
    open_store: Callable[[StoreSpec], ObjectStore]
    on_broken: Callable[[str], None]  # the follower starts the deltas afresh
    _asked: VerifyAsk | None = None
    _wake: trio.Event = field(factory=trio.Event)

    def ask(self, ask: VerifyAsk) -> None:
        self._asked = ask  # a newer chain replaces one not yet started
        self._wake.set()

    async def run(self) -> None:
        failures = 0
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            ask, self._asked = self._asked, None
            spec = self.context.desired().resource.spec.backup
            if ask is None or spec is None or spec.store is None:
                continue
            try:
                await self._verify(spec.store, ask)
                failures = 0
            except Exception as exc:  # a store or scratch member that failed: try again later
                failures += 1
                log.warning(
                    "verifying the delta backups of %s to revision %d: %s", self.context.ref, ask.reach, exc
                )
                await self._event(
                    "DeltaBackupFailed",
                    f"the deltas to revision {ask.reach} could not be verified: {exc}",
                    True,
                )
                await trio.sleep(RETRY.base_delay(min(failures - 1, 10)))
                if self._asked is None:
                    self.ask(ask)

    async def _verify(self, store_spec: StoreSpec, ask: VerifyAsk) -> None:
        started = trio.current_time()
        log.info("verifying the delta backups of %s to revision %d", self.context.ref, ask.reach)
        store = self.open_store(store_spec)
        try:
            try:
                plan = await plan_chain(store, self.context.ref, ask.reach)
                restored = await self.verifier.replayed_hash(
                    store.get_stream(plan.snapshot_key),
                    plan.changes,
                    ask.reach,
                    compact_to=ask.source.compact_revision,
                )
            except RestoreFailed as exc:  # the chain itself: a gap, a bad chunk, a bad change
                verdict = Verdict(False, f"the deltas to revision {ask.reach} do not replay: {exc}")
            else:
                verdict = judge(ask, restored, plan)
        finally:
            await store.aclose()
        took = f" in {trio.current_time() - started:.1f}s"
        if verdict.passed:
            await self._event("DeltaBackupVerified", verdict.message + took)
        elif verdict.passed is None:
            await self._event("DeltaVerificationSkipped", verdict.message)
        else:
            log.warning("delta backups of %s: %s", self.context.ref, verdict.message)
            await self._event("DeltaVerificationFailed", verdict.message + took, True)
            self.on_broken(verdict.message)

    async def _event(self, reason: str, message: str, warning: bool = False) -> None:
        await self.context.ports.events.record(
            self.context.ref, reason=reason, message=message, warning=warning
        )
