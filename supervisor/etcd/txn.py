"""A small typed vocabulary for transactions: compare predicates and the operations to run.

await client.txn(
    compare=[Compare.version(b"/lock", "==", 0)],
    success=[Put(b"/lock", b"me")],
    failure=[Get(b"/lock")],
)
"""

from __future__ import annotations

import enum
from typing import Literal

import attrs

CompareOp = Literal["==", "!=", ">", "<"]


class CompareTarget(enum.Enum):
    VERSION = 0
    CREATE_REVISION = 1
    MOD_REVISION = 2
    VALUE = 3
    LEASE = 4


@attrs.frozen
class Compare:
    key: bytes
    target: CompareTarget
    op: CompareOp
    operand: int | bytes
    range_end: bytes = b""

    def __attrs_post_init__(self) -> None:
        wants_bytes = self.target is CompareTarget.VALUE
        if wants_bytes != isinstance(self.operand, bytes):
            raise TypeError(f"{self.target.name} compares against {'bytes' if wants_bytes else 'int'}")

    @classmethod
    def value(cls, key: bytes, op: CompareOp, value: bytes) -> Compare:
        return cls(key, CompareTarget.VALUE, op, value)

    @classmethod
    def version(cls, key: bytes, op: CompareOp, version: int) -> Compare:
        """Version 0 means the key does not exist."""
        return cls(key, CompareTarget.VERSION, op, version)

    @classmethod
    def create_revision(cls, key: bytes, op: CompareOp, revision: int) -> Compare:
        return cls(key, CompareTarget.CREATE_REVISION, op, revision)

    @classmethod
    def mod_revision(cls, key: bytes, op: CompareOp, revision: int) -> Compare:
        return cls(key, CompareTarget.MOD_REVISION, op, revision)

    @classmethod
    def lease(cls, key: bytes, op: CompareOp, lease: int) -> Compare:
        return cls(key, CompareTarget.LEASE, op, lease)


@attrs.frozen
class Put:
    key: bytes
    value: bytes
    lease: int = 0


@attrs.frozen
class Get:
    key: bytes
    range_end: bytes = b""
    limit: int = 0


@attrs.frozen
class Delete:
    key: bytes
    range_end: bytes = b""


TxnOp = Put | Get | Delete
