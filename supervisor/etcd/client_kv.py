"""Keys, revisions, transactions and leases: EtcdClient's data calls."""

from __future__ import annotations

from collections.abc import Sequence

from grpclib.client import Channel

from proto.etcd import etcdserverpb as pb

from . import wire
from .client_base import READ_ROUNDS, EtcdConnection, retry_if_unapplied
from .errors import EtcdError, LeaseNotFound
from .records import KeyValue, TxnResult
from .transport import Metadata
from .txn import Compare, TxnOp


class KeyValueCalls(EtcdConnection):
    """Reads and writes of keys, and the leases keys hang on."""

    async def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        """Store ``value`` at ``key``; returns the store revision of the write."""
        request = pb.PutRequest(key=key, value=value, lease=lease)
        response = await self._call(lambda ch, md, t: pb.KvStub(ch).put(request, timeout=t, metadata=md))
        return int(response.header.revision)

    async def get(self, key: bytes) -> bytes | None:
        found = await self.range(key)
        return found[0].value if found else None

    async def range(
        self,
        key: bytes,
        range_end: bytes = b"",
        *,
        limit: int = 0,
        serializable: bool = False,
        revision: int = 0,
    ) -> list[KeyValue]:
        """The keys as they are (`revision` 0) or were at `revision` (Compacted once it is gone)."""
        request = pb.RangeRequest(
            key=key, range_end=range_end, limit=limit, serializable=serializable, revision=revision
        )
        response = await self._call(
            lambda ch, md, t: pb.KvStub(ch).range(request, timeout=t, metadata=md), rounds=READ_ROUNDS
        )
        return [wire.key_value(kv) for kv in response.kvs]

    async def delete(self, key: bytes, range_end: bytes = b"") -> int:
        """Delete ``key`` (or the range up to ``range_end``); returns how many keys went."""
        request = pb.DeleteRangeRequest(key=key, range_end=range_end)
        response = await self._call(
            lambda ch, md, t: pb.KvStub(ch).delete_range(request, timeout=t, metadata=md)
        )
        return int(response.deleted)

    async def txn(
        self,
        *,
        compare: Sequence[Compare] = (),
        success: Sequence[TxnOp] = (),
        failure: Sequence[TxnOp] = (),
    ) -> TxnResult:
        request = wire.txn_request(compare, success, failure)
        response = await self._call(
            lambda ch, md, t: pb.KvStub(ch).txn(request, timeout=t, metadata=md), retry=retry_if_unapplied
        )
        return wire.txn_result(response)

    async def compact(self, revision: int, *, physical: bool = True) -> None:
        request = pb.CompactionRequest(revision=revision, physical=physical)
        await self._call(lambda ch, md, t: pb.KvStub(ch).compact(request, timeout=t, metadata=md))

    async def current_revision(self) -> int:
        request = pb.RangeRequest(key=b"\0", count_only=True)
        response = await self._call(lambda ch, md, t: pb.KvStub(ch).range(request, timeout=t, metadata=md))
        return int(response.header.revision)

    # ---- leases

    async def lease_grant(self, ttl: int, *, lease_id: int = 0) -> int:
        """A new lease of `ttl` seconds (etcd raises a TTL below its minimum to it); `lease_id`
        asks for that ID (LeaseExists when it is taken), 0 lets etcd choose."""
        request = pb.LeaseGrantRequest(ttl=ttl, id=lease_id)
        response = await self._call(
            lambda ch, md, t: pb.LeaseStub(ch).lease_grant(request, timeout=t, metadata=md),
            retry=retry_if_unapplied,
        )
        if response.error:
            raise EtcdError(f"lease grant refused: {response.error}")
        return int(response.id)

    async def lease_revoke(self, lease_id: int) -> None:
        request = pb.LeaseRevokeRequest(id=lease_id)
        await self._call(lambda ch, md, t: pb.LeaseStub(ch).lease_revoke(request, timeout=t, metadata=md))

    async def lease_granted_ttl(self, lease_id: int) -> int | None:
        """The TTL the lease was granted with; None when it is gone (expired or revoked)."""
        request = pb.LeaseTimeToLiveRequest(id=lease_id)
        try:
            response = await self._call(
                lambda ch, md, t: pb.LeaseStub(ch).lease_time_to_live(request, timeout=t, metadata=md),
                rounds=READ_ROUNDS,
            )
        except LeaseNotFound:  # what some versions answer instead of a TTL of -1
            return None
        return int(response.granted_ttl) if response.ttl >= 0 else None

    async def lease_ids(self) -> list[int]:
        """Every lease granted and not yet gone."""
        response = await self._call(
            lambda ch, md, t: pb.LeaseStub(ch).lease_leases(pb.LeaseLeasesRequest(), timeout=t, metadata=md),
            rounds=READ_ROUNDS,
        )
        return [int(lease.id) for lease in response.leases]

    async def lease_keep_alive(self, lease_ids: Sequence[int]) -> dict[int, int]:
        """Refresh each lease once, on one short stream: its TTL from now on, 0 when it is gone."""
        if not lease_ids:
            return {}
        requests = [pb.LeaseKeepAliveRequest(id=i) for i in lease_ids]

        async def round_trip(channel: Channel, md: Metadata, seconds: float) -> dict[int, int]:
            stub = pb.LeaseStub(channel)
            return {
                int(r.id): max(int(r.ttl), 0)
                async for r in stub.lease_keep_alive(requests, timeout=seconds, metadata=md)
            }

        return await self._call(round_trip)
