"""Waiting for a scratch etcd (supervisor/etcd/head_hash.py), against real etcd: the hash it
returns is the member's own at its head, and a scratch that never answers is said, with why,
instead of being waited on in silence until the caller's long deadline."""

from __future__ import annotations

import logging

import pytest
import trio

from supervisor.etcd import head_hash, open_etcd_client
from tests.harness.etcd import EtcdCluster, free_port


async def test_the_hash_at_head_is_the_members_own_at_its_revision(
    one_member: EtcdCluster, asyncio_loop: None
) -> None:
    (url,) = one_member.endpoints
    async with open_etcd_client([url]) as client:
        revision = await client.put(b"/head-hash/k", b"v")
        found = await head_hash.hash_at_head(url)
        expected = await client.hash_kv(url, revision)
    assert (found.revision, found.hash) == (revision, expected.hash)


async def test_a_scratch_that_does_not_answer_is_said_with_its_last_error(
    asyncio_loop: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(head_hash, "SAY_EVERY", 0.3)
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    caplog.set_level(logging.WARNING, logger=head_hash.__name__)
    async with open_etcd_client([url], call_timeout=1.0) as client:
        with trio.move_on_after(1.0):
            await head_hash.wait_serving(client, url)
    said = [r.getMessage() for r in caplog.records if r.name == head_hash.__name__]
    assert said, "a scratch etcd that never answered was waited on without a word"
    assert all(url in line and "not answering after" in line for line in said), said
    assert len(said) <= 4, said  # said every SAY_EVERY, not at each retry
