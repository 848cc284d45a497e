"""Delta backups verified as they are written, on real etcd and a real store: the chain a
recovery would use (the verified snapshot and the stored chunks after it) replays in a scratch
member to the source's HashKV at the chunks' reach, through a compaction of the source; a chunk
corrupted in the store fails the verification and a full backup restarts the deltas."""

from __future__ import annotations

import base64
import json
import re

from actors.backup.deltas import covered_to
from actors.backup.encoded_store import encoded
from actors.backup.envelope import encode
from actors.backup.point_in_time import plan_chain
from actors.model import LocalStore, StoreSpec
from supervisor.etcd import Delete, open_etcd_client
from supervisor.local.backups import local_backups, local_store_opener
from supervisor.local.deltas import local_deltas
from tests.backup.test_deltas import _verified, chunk_bytes, follower_started, stored_chunks, with_backups
from tests.chaos.lifecycle import open_local_supervisor, resource
from tests.harness.clock import SteppedClock
from tests.harness.poll import eventually

VERIFIED = re.compile(r"to revision (\d+) replay .* (\d+) changes replayed, HashKV (\d+) at revision")


async def test_deltas_verify_against_the_source_and_a_corrupted_chunk_restarts_them(tmp_path):
    directory = tmp_path / "backups"
    store = StoreSpec(local=LocalStore(str(directory)))
    source = with_backups(resource("source", size=1), store)
    clock = SteppedClock()  # one scheduled backup: every chunk stays on its base

    def children(runtime):
        scratch = tmp_path / "scratch"
        return [
            local_backups(runtime, manifest_dir=tmp_path, scratch_dir=scratch, clock=clock, wake_every=0.5),
            local_deltas(runtime, manifest_dir=tmp_path, scratch_dir=scratch, clock=clock, verify_every=1.0),
        ]

    async with open_local_supervisor(
        tmp_path / "state", children=children, stores=local_store_opener(tmp_path, {})
    ) as sup:
        await sup.fleet.apply([source])
        status = await sup.wait_healthy(source.ref, 1)
        url = status.members[0].client_url
        events = sup.recorder.events
        async with open_etcd_client([url]) as etcd:
            await first_backup(sup, source.ref, clock)
            base = await follower_started(etcd, directory, source.ref)
            # Puts and deletes, and a compaction of the source in the middle of the deltas:
            # its HashKV then covers fewer revisions than the snapshot's history holds.
            for i in range(120):
                key = b"v/%02d" % (i % 15)
                if i % 7 == 3:
                    await etcd.txn(success=[Delete(key)])
                else:
                    last = await etcd.put(key, b"value %d" % i)
                if i == 60:
                    await etcd.compact(last)
            last = await etcd.current_revision()

            # (1) A verification of a chain reaching at least the workload's end: its revision
            # is where the stored chunks reached, its hash the source's there.
            def verified_past(since: int, at_least: int):
                found = [m for r, why, text in events[since:] if why == "DeltaBackupVerified" for m in [text]]
                got = [VERIFIED.search(text) for text in found]
                return next((g for g in got if g and int(g.group(1)) >= at_least), None)

            match = await eventually(lambda: verified_past(0, last), within=60, what="a verified chain")
            reach, replayed, kv_hash = (int(g) for g in match.groups())
            refs, _ = stored_chunks(directory, source.ref)
            assert reach in {r.last for r in refs} and covered_to(refs, base) >= reach
            assert kv_hash == (await etcd.hash_kv(url, reach)).hash
            assert replayed >= last - base  # every revision since the base changed at least a key
            assert not [
                why for _, why, _ in events if why in ("DeltaVerificationFailed", "DeltaVerificationSkipped")
            ]

            # (2) One value flipped in a stored chunk: the next verification fails, naming the
            # revision and both hashes, and a full backup starts the deltas afresh, verified again.
            corrupted = _flip_a_value(directory, refs)
            mark = len(events)
            await etcd.put(b"after", b"the corruption")
            failed = await eventually(
                lambda: [t for _, why, t in events[mark:] if why == "DeltaVerificationFailed"],
                within=60,
                what="a failed verification",
            )
            assert re.search(r"HashKV at revision \d+ is \d+ replayed from .* but \d+ on", failed[0]), failed
            fresh = await eventually(
                lambda: [
                    t for _, why, t in events[mark:] if why == "BackupSucceeded" and "for the deltas" in t
                ],
                within=60,
                what="a full backup for the deltas",
            )
            new_base = int(re.search(r"at revision (\d+)", fresh[0]).group(1))
            head = await etcd.put(b"after", b"the full backup")
            again = await eventually(
                lambda: verified_past(mark, head), within=60, what="a verified chain on the new base"
            )
            assert f"(revision {new_base})" in again.string  # replayed from the new snapshot
            plan = await plan_chain(
                encoded(local_store_opener(tmp_path, {})(store), source.ref, None, None), source.ref, head
            )
            # A recovery now starts from the new snapshot, past the corrupted chunk.
            assert plan.snapshot_revision == new_base > corrupted.last


async def first_backup(sup, ref, clock) -> None:
    """Step the schedule's clock until a verified backup is there (a step taken before the
    backup actor first looked at the schedule does not count as a slot)."""

    def step_and_look():
        if _verified(sup.recorder.statuses[ref]) == 0:
            clock.next_minute()
        return _verified(sup.recorder.statuses[ref])

    await eventually(step_and_look, within=60, every=3.0, what="a verified backup")


def _flip_a_value(directory, refs):
    """Change the value of the last put stored (one the source's compaction left in its
    HashKV); its chunk."""
    for ref in sorted(refs, key=lambda r: r.last, reverse=True):
        path = directory / ref.key
        lines = chunk_bytes(directory, ref.key).decode().splitlines()
        for i in reversed(range(len(lines))):
            record = json.loads(lines[i])
            if "value" in record:
                record["value"] = base64.b64encode(b"flipped").decode()
                lines[i] = json.dumps(record)
                # Stored as the follower stores chunks (compressed), so only its content is wrong.
                path.write_bytes(encode(("\n".join(lines) + "\n").encode(), compress=True, key=None)[0])
                return ref
    raise AssertionError("no put stored")
