"""RestoreSeed on the autojump clock: the restored seed serves before its HashKV is asked, and the
step ends as soon as the seed answers (the real-etcd side is tests/backup/test_restore.py)."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from actors.actions import SEED_ANSWER_PAUSE, ActionContext, RestoreSeed
from actors.backup.ports import Restored
from actors.backup.records import KvHash
from actors.errors import EtcdUnavailable, RestoreFailed
from actors.model import ClusterSpec, LocalStore, RestoreSpec, StoreSpec
from actors.observed import Observed
from tests.actors.world import REF, MemoryWorld

LOADING = 2.0  # seconds the seed takes to load its database before it answers anything
BACKUP = Restored("k.db", 100, "sha", revision=41, kv_hash=777)


@attrs.define
class SeedWorld(MemoryWorld):
    """A seed that loads, then serves; what it was asked, in order, with the time."""

    seed_hash: int = 777
    asked: list[tuple[str, float]] = attrs.field(factory=list)

    async def restore_seed(self, launch, source):
        return BACKUP

    def _loading(self) -> bool:
        started = self.started_at.get("demo-0")
        return started is None or trio.current_time() < started + LOADING

    async def revision(self, endpoints):
        self.asked.append(("revision", trio.current_time()))
        if self._loading():
            raise EtcdUnavailable("connection refused")
        return 41

    async def kv_hash(self, endpoint, revision):
        self.asked.append(("kv_hash", trio.current_time()))
        if self._loading():
            raise EtcdUnavailable("connection refused")
        return KvHash(self.seed_hash, revision, 0)


def context(world: SeedWorld) -> ActionContext:
    spec = ClusterSpec(size=3, tls_enabled=False)
    return ActionContext(
        spec, Observed(REF, (), (), {}), world, world, restorer=world, events=world, sleep=trio.sleep
    )


STEP = RestoreSeed("demo-0", RestoreSpec(store=StoreSpec(local=LocalStore("/b")), key="k.db"))


async def test_the_seed_serves_a_read_before_its_hashkv_is_asked(autojump_clock: trio.abc.Clock) -> None:
    world = SeedWorld()
    await STEP.execute(context(world))
    names = [name for name, _ in world.asked]
    served = names.index("kv_hash")
    # Only reads until it served one (HashKV would hold its read transaction while it still
    # applies what it started with), then one HashKV.
    assert set(names[:served]) == {"revision"} and names[served:] == ["kv_hash"]
    started = world.started_at["demo-0"]
    # Asked often: the step is done within one pause of the seed's first possible answer.
    assert started + LOADING <= world.asked[-1][1] <= started + LOADING + SEED_ANSWER_PAUSE
    assert [reason for _, reason, _ in world.events] == ["RestoreVerified"]


async def test_a_seed_with_other_data_is_deleted(autojump_clock: trio.abc.Clock) -> None:
    world = SeedWorld(seed_hash=778)
    with pytest.raises(RestoreFailed, match="HashKV at revision 41 is 778, the backup recorded 777"):
        await STEP.execute(context(world))
    assert "demo-0" not in world.runtime  # nothing half-built stays
