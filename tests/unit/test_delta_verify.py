"""When the chain of delta backups is verified, and how its hash is judged (pure)."""

from __future__ import annotations

from actors.backup.delta_verify import Checkpoint, VerifyAsk, judge, verification_due
from actors.backup.point_in_time import PointInTime
from actors.backup.records import KvHash


def test_the_first_chunk_on_a_new_base_is_verified_at_once_then_at_most_every_interval():
    assert verification_due(None, base=10, reach=20, now=0.0, every=600.0)
    last = Checkpoint(base=10, reach=20, at=100.0)
    assert not verification_due(last, base=10, reach=30, now=699.0, every=600.0)  # too soon
    assert verification_due(last, base=10, reach=30, now=700.0, every=600.0)
    assert not verification_due(last, base=10, reach=20, now=900.0, every=600.0)  # nothing new
    assert verification_due(last, base=25, reach=26, now=101.0, every=600.0)  # a new full snapshot


PLAN = PointInTime("default/demo/x-rev10.db", 10, (), 30, chunks=2)


def test_equal_hashes_pass_different_ones_fail_naming_both_and_other_compactions_are_skipped():
    ask = VerifyAsk(30, KvHash(hash=111, revision=30, compact_revision=5), "http://m1")
    passed = judge(ask, KvHash(111, 30, 5), PLAN)
    assert passed.passed is True and "revision 30" in passed.message and "2 chunks" in passed.message
    failed = judge(ask, KvHash(222, 30, 5), PLAN)
    assert failed.passed is False
    assert "222" in failed.message and "111" in failed.message and "revision 30" in failed.message
    skipped = judge(ask, KvHash(222, 30, 9), PLAN)  # the snapshot's history compacted further
    assert skipped.passed is None and "compacted" in skipped.message
