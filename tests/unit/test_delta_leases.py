"""Leases in delta backups: the follower asks etcd once per lease and stamps each leased put with
its granted TTL (the rules, and the history stream that applies them, with a client in memory);
a replay grants what the snapshot lacks, with the recorded TTL."""

import trio

from actors.backup.deltas import Change
from actors.backup.leases import (
    GONE_LEASE_TTL,
    LEASE_GONE,
    LeaseTtls,
    leases_to_grant,
    replayed_lease,
)
from supervisor.etcd.admin import _History
from supervisor.etcd.records import KeyValue
from supervisor.etcd.watch import EventKind, WatchBatch, WatchEvent


def put(revision, lease=0, ttl=None):
    return Change(revision, b"k%d" % revision, b"v", lease, ttl)


def test_the_follower_asks_once_per_lease_and_stamps_every_put_with_its_ttl():
    ttls = LeaseTtls()
    batch = [put(5, lease=7), put(6), Change(7, b"k5", None), put(8, lease=9), put(9, lease=7)]
    assert ttls.unknown(batch) == [7, 9]  # once each, in order of first use; deletes have none
    ttls.learn(7, 30)
    ttls.learn(9, None)  # gone by the time it was asked
    stamped = ttls.stamp(batch)
    assert [c.lease_ttl for c in stamped] == [30, None, None, LEASE_GONE, 30]
    assert ttls.unknown([put(10, lease=7)]) == []  # known: not asked again
    # A put with a lease seen gone means the ID was granted anew: it is asked again.
    assert ttls.unknown([put(11, lease=9)]) == [9]


def test_the_follower_forgets_the_oldest_lease_beyond_its_limit():
    ttls = LeaseTtls(limit=2)
    for lease in (1, 2, 3):
        ttls.learn(lease, 10 * lease)
    assert ttls.unknown([put(5, lease=1), put(6, lease=2), put(7, lease=3)]) == [1]


def test_a_replay_grants_what_the_snapshot_lacks_with_the_recorded_ttl():
    changes = [
        put(5, lease=7, ttl=30),
        put(6, lease=7, ttl=30),
        put(7, lease=8, ttl=60),  # in the snapshot already
        put(8, lease=9, ttl=LEASE_GONE),
        put(9, lease=10),  # a chunk from before leases were recorded
        Change(10, b"k5", None),
    ]
    grants = leases_to_grant(changes, present={8})
    assert grants == {7: 30, 9: GONE_LEASE_TTL}
    held = {8} | grants.keys()
    assert [replayed_lease(c, held) for c in changes] == [7, 7, 8, 9, 0, 0]


class _Watch:
    def __init__(self, *batches):
        self._batches = list(batches)

    async def __anext__(self):
        return self._batches.pop(0)


class _SlowLeases:
    """A client whose LeaseTimeToLive answers only once `answer` is set."""

    def __init__(self):
        self.answer = trio.Event()
        self.asked: list[int] = []

    async def lease_granted_ttl(self, lease):
        self.asked.append(lease)
        await self.answer.wait()
        return 30


def _put(revision, lease):
    return WatchEvent(EventKind.PUT, KeyValue(b"k", b"v", mod_revision=revision, lease=lease))


async def test_a_batch_cut_off_while_its_lease_is_asked_about_comes_next_time_with_the_ttl(autojump_clock):
    client = _SlowLeases()
    history = _History(_Watch(WatchBatch((_put(5, 7),), 5), WatchBatch((_put(6, 7),), 6)), client)
    with trio.move_on_after(1.0) as cut:  # the follower's period ends meanwhile
        await history.__anext__()
    assert cut.cancelled_caught
    client.answer.set()
    first, second = await history.__anext__(), await history.__anext__()
    assert [(c.revision, c.lease, c.lease_ttl) for c in first.changes + second.changes] == [
        (5, 7, 30),
        (6, 7, 30),
    ]
    assert client.asked == [7, 7]  # asked again after the cut, then known
