"""Delta backups on real etcd (spec.backup.deltaPeriod): every acknowledged write after the full
snapshot lands in the store's chunks, once, in revision order and without a gap, while a member
is killed and the leader changes under the watch."""

from __future__ import annotations

import os
import random
import signal
from contextlib import asynccontextmanager

import attrs
import trio
from attrs import Factory, define

from actors.backup.deltas import covered_to, decode_chunk, deltas_prefix, parse_chunk_key
from actors.backup.envelope import decode
from actors.backup.keys import no_keys
from actors.model import BackupSpec, LocalStore, RestoreSpec, Role, StoreSpec
from supervisor.etcd import Delete, open_etcd_client
from supervisor.local.backups import local_backups, local_store_opener
from supervisor.local.deltas import local_deltas
from tests.chaos.lifecycle import follow_members, open_local_supervisor, resource
from tests.chaos.test_quorum_recovery import RevisionWriter
from tests.harness.clock import fast_clock
from tests.harness.poll import eventually


def with_backups(res, store: StoreSpec, delta_period: str = "1s"):
    backup = BackupSpec(schedule="* * * * *", store=store, delta_period=delta_period)
    return attrs.evolve(res, spec=attrs.evolve(res.spec, backup=backup))


def children_for(tmp_path, clock=None):
    clock = clock or fast_clock()

    def children(runtime):
        scratch = tmp_path / "scratch"
        return [
            local_backups(runtime, manifest_dir=tmp_path, scratch_dir=scratch, clock=clock, wake_every=0.5),
            local_deltas(runtime, manifest_dir=tmp_path, scratch_dir=scratch, clock=clock),
        ]

    return children


def stored_chunks(directory, ref):
    root = directory / deltas_prefix(ref)
    refs = [c for p in sorted(root.glob("*.jsonl")) if (c := parse_chunk_key(str(p.relative_to(directory))))]
    return refs, [change for r in refs for change in decode_chunk(chunk_bytes(directory, r.key))]


def chunk_bytes(directory, key):
    """A chunk as the follower gave it to the store (stored compressed: zstd is the default)."""
    return decode((directory / key).read_bytes(), no_keys(""), key)


async def test_deltas_hold_every_acknowledged_write_through_a_member_kill_and_a_leader_change(tmp_path):
    directory = tmp_path / "backups"
    store = StoreSpec(local=LocalStore(str(directory)))
    demo = with_backups(resource(size=3), store)
    stores = local_store_opener(tmp_path, {})
    async with open_local_supervisor(
        tmp_path / "state", children=children_for(tmp_path), stores=stores
    ) as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        writer = RevisionWriter([m.client_url for m in status.members])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            nursery.start_soon(follow_members, sup, demo.ref, writer)
            status = await sup.wait_for(demo.ref, lambda s: _verified(s) > 0, timeout=60)
            # The kills below must happen under the follower's watch: wait for its first chunk.
            # Its chunks start from the newest verified snapshot when it started (the first one,
            # or one taken since on this loaded machine), not necessarily the one seen above.
            base = await deltas_start(directory, demo.ref)
            await writer.wait_for_more(50)
            follower = next(m for m in status.members if m.role is Role.FOLLOWER)
            os.kill(follower.pid, signal.SIGKILL)
            await sup.wait_for(demo.ref, lambda s: _healthy_with_new_pid(s, follower), timeout=60)
            await writer.wait_for_more(50)
            leader = next(m for m in sup.recorder.statuses[demo.ref].members if m.role is Role.LEADER)
            os.kill(leader.pid, signal.SIGKILL)  # a leader change under the watch
            await sup.wait_for(demo.ref, lambda s: _healthy_with_new_pid(s, leader), timeout=60)
            await writer.wait_for_more(50)
            nursery.cancel_scope.cancel()
        last = writer.acked[-1][2]
        await eventually(
            lambda: covered_to(stored_chunks(directory, demo.ref)[0], base),
            lambda covered: covered >= last,
            within=60,
            every=0.2,
            what=f"chunks covering revision {last}",
        )
    refs, changes = stored_chunks(directory, demo.ref)
    revisions = [c.revision for c in changes]
    assert revisions == sorted(set(revisions)), "each change once, in revision order"
    assert covered_to(refs, base) >= last, "no gap in the history from the snapshot on"
    stored = {(c.revision, c.key, c.value) for c in changes}
    wanted = {(rev, key, value) for key, value, rev in writer.acked if rev > base}
    assert len(wanted) >= 150 and wanted <= stored
    # A failed attempt (an etcd or store hiccup on a loaded machine) is retried from where the
    # stored chunks end: the assertions above hold whatever the attempts were.


async def deltas_start(directory, ref) -> int:
    """The revision the follower's chunks start from (a verified snapshot's), once it has
    written its first chunk."""
    refs = await eventually(
        lambda: stored_chunks(directory, ref)[0], within=60, every=0.2, what="the follower's first chunk"
    )
    return min(r.first for r in refs) - 1


def _verified(status) -> int:
    last = status.backup.last_successful_backup if status.backup else None
    return last.revision if last is not None and last.verified else 0


def _healthy_with_new_pid(status, before) -> bool:
    now = next((m for m in status.members if m.name == before.name), None)
    return (
        now is not None
        and now.pid != before.pid
        and status.ready_replicas == 3
        and all(m.healthy for m in status.members)
    )


async def test_restore_to_each_of_several_revisions_gives_exactly_the_state_at_that_revision(tmp_path):
    store = StoreSpec(local=LocalStore(str(tmp_path / "backups")))
    source = with_backups(resource("source", size=3), store)
    async with running(tmp_path, source) as (sup, status):
        status = await sup.wait_for(source.ref, lambda s: _verified(s) > 0, timeout=60)
        snapshot_key = status.backup.last_successful_backup.key  # any backup of the cluster
        workload = PitWorkload(random.Random(15))
        async with open_etcd_client([m.client_url for m in status.members]) as etcd:
            await follower_started(etcd, tmp_path / "backups", source.ref)
            await workload.run(etcd, 300)
        history = workload.history
        last = history[-1][0]
        base = await eventually(
            lambda: deltas_base(tmp_path / "backups", source.ref, last),
            lambda found: found is not None,
            within=30,
            every=0.2,
            what=f"deltas past revision {last}",
        )
        # The snapshot the deltas start from alone, a revision in the middle, and the last one.
        later = [rev for rev, _, _ in history if rev > base]
        targets = [base, later[len(later) // 2], last]
        restored = [restored_at(store, snapshot_key, t) for t in targets]
        await sup.fleet.apply([source, *restored])
        for res, target in zip(restored, targets, strict=True):
            await assert_restored_at(sup, res, target, history)
            (verified,) = [
                m for r, reason, m in sup.recorder.events if r == res.ref and reason == "RestoreVerified"
            ]
            assert f"at revision {target}" in verified


@asynccontextmanager
async def running(tmp_path, res):
    """A supervisor with backups and deltas (children_for) running `res`, once it is healthy."""
    stores = local_store_opener(tmp_path, {})
    async with open_local_supervisor(
        tmp_path / "state", children=children_for(tmp_path), stores=stores
    ) as sup:
        await sup.fleet.apply([res])
        yield sup, await sup.wait_healthy(res.ref, res.spec.size)


@define
class PitWorkload:
    """Puts and deletes over a few keys (pit/..); its own acknowledged history, (revision, key,
    value or None for a delete), says what every key held at every revision."""

    rng: random.Random
    history: list[tuple[int, bytes, bytes | None]] = Factory(list)

    async def run(self, etcd, n: int) -> None:
        for _ in range(n):
            key = b"pit/%02d" % self.rng.randrange(20)
            if self.rng.random() < 0.2:
                self.history.append(((await etcd.txn(success=[Delete(key)])).revision, key, None))
            else:
                value = b"v%d" % len(self.history)
                self.history.append((await etcd.put(key, value), key, value))


async def follower_started(etcd, directory, ref) -> int:
    """Once the follower follows (writes outside the keys compared show it), so that a workload
    started then is all in its chunks; the revision its chunks start after."""
    async with trio.open_nursery() as nursery:

        async def nudge() -> None:
            while True:
                await etcd.put(b"nudge", b"")
                await trio.sleep(0.5)

        nursery.start_soon(nudge)
        base = await deltas_start(directory, ref)
        nursery.cancel_scope.cancel()
    return base


async def assert_restored_at(sup, res, target, history):
    """The restored cluster `res` holds exactly the keys the workload's `history` says at
    `target`, and continues the original's revisions from there."""
    status = await sup.wait_healthy(res.ref, 1, timeout=120)
    async with open_etcd_client([m.client_url for m in status.members]) as etcd:
        got = {kv.key: kv.value for kv in await etcd.range(b"pit/", b"pit0")}
        head = await etcd.current_revision()
    assert got == state_at(history, target), f"revision {target}"
    assert head == target


def restored_at(store, key, revision):
    """A new one-member cluster restored from the backups of `key`'s cluster to `revision`."""
    spec = attrs.evolve(resource().spec, restore=RestoreSpec(store=store, key=key, revision=revision), size=1)
    return attrs.evolve(resource(f"at-{revision}", size=1), spec=spec)


def deltas_base(directory, ref, last):
    """The revision the stored deltas start from (a full snapshot's), once they reach `last`."""
    refs, _ = stored_chunks(directory, ref)
    if not refs:
        return None
    base = min(r.first for r in refs) - 1
    return base if covered_to(refs, base) >= last else None


def state_at(history, revision):
    state: dict[bytes, bytes] = {}
    for rev, key, value in history:
        if rev > revision:
            break
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state
