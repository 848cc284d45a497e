"""Replaying delta-backup changes into a scratch etcd (restore to a revision, local and on
Kubernetes): one transaction per original revision, so the scratch's revisions come out the same
as the original's (every etcd revision changes at least one key)."""

from __future__ import annotations

from collections.abc import Sequence

import trio

from actors.backup.deltas import Change
from actors.errors import RestoreFailed

from .client import EtcdClient
from .errors import EtcdError
from .txn import Delete, Put, TxnOp


async def wait_serving(client: EtcdClient) -> None:
    """Until a freshly started scratch member answers (the caller bounds the wait)."""
    while True:
        try:
            await client.current_revision()
            return
        except EtcdError:
            await trio.sleep(0.1)


async def replay_up_to(client: EtcdClient, url: str, changes: Sequence[Change], target: int) -> int:
    """Apply `changes` to the scratch member at `url`, which must then stand at revision
    `target`; returns its HashKV there (what the restored seed must show)."""
    await apply_changes(client, changes)
    head = await client.current_revision()
    if head != target:
        raise RestoreFailed(f"replaying the deltas reached revision {head}, not {target}")
    return (await client.hash_kv(url, target)).hash


async def apply_changes(client: EtcdClient, changes: Sequence[Change]) -> None:
    """One transaction per original revision, so the revisions come out the same."""
    batch: list[TxnOp] = []
    at = None
    for change in changes:
        if at is not None and change.revision != at:
            await client.txn(success=batch)
            batch = []
        at = change.revision
        batch.append(Put(change.key, change.value) if change.value is not None else Delete(change.key))
    if batch:
        await client.txn(success=batch)
