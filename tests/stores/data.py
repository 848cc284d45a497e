"""Reproducible test objects, produced chunk by chunk so that a big one is never whole in memory."""

from __future__ import annotations

import hashlib
import random
from collections.abc import AsyncIterator

MiB = 1 << 20


async def chunks(size: int, *, seed: int = 1, chunk: int = MiB) -> AsyncIterator[bytes]:
    rng = random.Random(seed)
    left = size
    while left > 0:
        n = min(chunk, left)
        yield rng.randbytes(n)
        left -= n


async def sha256_of(size: int, *, seed: int = 1) -> str:
    digest = hashlib.sha256()
    async for piece in chunks(size, seed=seed):
        digest.update(piece)
    return digest.hexdigest()


async def drain(stream: AsyncIterator[bytes]) -> tuple[int, str]:
    """Size and sha256 of a stream, holding one chunk at a time."""
    digest = hashlib.sha256()
    size = 0
    async for piece in stream:
        digest.update(piece)
        size += len(piece)
    return size, digest.hexdigest()
