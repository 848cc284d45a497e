"""Translation between our records and the generated protobuf messages (kept in one place)."""

from __future__ import annotations

from collections.abc import Sequence

import betterproto

from proto.etcd import authpb, mvccpb
from proto.etcd import etcdserverpb as pb

from .records import (
    Alarm,
    AlarmKind,
    EndpointStatus,
    HashKV,
    KeyValue,
    Member,
    PermissionKind,
    TxnOpResult,
    TxnResult,
)
from .txn import Compare, CompareTarget, Delete, Get, Put, TxnOp

_COMPARE_RESULT = {
    "==": pb.CompareCompareResult.EQUAL,
    "!=": pb.CompareCompareResult.NOT_EQUAL,
    ">": pb.CompareCompareResult.GREATER,
    "<": pb.CompareCompareResult.LESS,
}


def key_value(kv: mvccpb.KeyValue) -> KeyValue:
    return KeyValue(
        key=kv.key,
        value=kv.value,
        create_revision=kv.create_revision,
        mod_revision=kv.mod_revision,
        version=kv.version,
        lease=kv.lease,
    )


def member(m: pb.Member) -> Member:
    return Member(
        id=m.id,
        name=m.name,
        peer_urls=tuple(m.peer_ur_ls),
        client_urls=tuple(m.client_ur_ls),
        is_learner=m.is_learner,
    )


def endpoint_status(endpoint: str, s: pb.StatusResponse) -> EndpointStatus:
    return EndpointStatus(
        endpoint=endpoint,
        member_id=s.header.member_id,
        leader_id=s.leader,
        raft_index=s.raft_index,
        raft_applied_index=s.raft_applied_index,
        raft_term=s.raft_term,
        db_size=s.db_size,
        db_size_in_use=s.db_size_in_use,
        is_learner=s.is_learner,
        version=s.version,
        errors=tuple(s.errors),
        revision=s.header.revision,
        downgrade_target=s.downgrade_info.target_version if s.downgrade_info.enabled else "",
        storage_version=s.storage_version,
    )


def alarm(a: pb.AlarmMember) -> Alarm | None:
    try:
        return Alarm(member_id=a.member_id, kind=AlarmKind(int(a.alarm)))
    except ValueError:
        return None  # NONE, or a kind newer than we know


def alarm_request(action: pb.AlarmRequestAlarmAction, alarm: Alarm | None = None) -> pb.AlarmRequest:
    if alarm is None:
        return pb.AlarmRequest(action=action)
    return pb.AlarmRequest(action=action, member_id=alarm.member_id, alarm=pb.AlarmType(alarm.kind.value))


def hash_kv(r: pb.HashKvResponse) -> HashKV:
    return HashKV(
        member_id=r.header.member_id,
        hash=r.hash,
        compact_revision=r.compact_revision,
        revision=r.header.revision,
    )


def compare(c: Compare) -> pb.Compare:
    message = pb.Compare(
        result=_COMPARE_RESULT[c.op],
        target=pb.CompareCompareTarget(c.target.value),
        key=c.key,
        range_end=c.range_end,
    )
    # Exactly one member of the oneof must be set, even when its value is zero.
    match c.target:
        case CompareTarget.VALUE:
            assert isinstance(c.operand, bytes)
            message.value = c.operand
        case CompareTarget.VERSION:
            message.version = int(c.operand)
        case CompareTarget.CREATE_REVISION:
            message.create_revision = int(c.operand)
        case CompareTarget.MOD_REVISION:
            message.mod_revision = int(c.operand)
        case CompareTarget.LEASE:
            message.lease = int(c.operand)
    return message


def request_op(op: TxnOp) -> pb.RequestOp:
    match op:
        case Put(key=key, value=value, lease=lease):
            return pb.RequestOp(request_put=pb.PutRequest(key=key, value=value, lease=lease))
        case Get(key=key, range_end=range_end, limit=limit):
            return pb.RequestOp(request_range=pb.RangeRequest(key=key, range_end=range_end, limit=limit))
        case Delete(key=key, range_end=range_end):
            return pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=key, range_end=range_end))
    raise TypeError(f"not a transaction operation: {op!r}")


def txn_request(
    compares: Sequence[Compare], success: Sequence[TxnOp], failure: Sequence[TxnOp]
) -> pb.TxnRequest:
    return pb.TxnRequest(
        compare=[compare(c) for c in compares],
        success=[request_op(op) for op in success],
        failure=[request_op(op) for op in failure],
    )


def txn_result(r: pb.TxnResponse) -> TxnResult:
    results = []
    for response in r.responses:
        match betterproto.which_one_of(response, "response"):
            case ("response_range", pb.RangeResponse() as rr):
                kvs = tuple(key_value(kv) for kv in rr.kvs)
                results.append(TxnOpResult(kvs=kvs, revision=rr.header.revision))
            case ("response_delete_range", pb.DeleteRangeResponse() as rd):
                results.append(TxnOpResult(deleted=rd.deleted, revision=rd.header.revision))
            case _:
                results.append(TxnOpResult(revision=r.header.revision))
    return TxnResult(succeeded=r.succeeded, revision=r.header.revision, responses=tuple(results))


def permission(kind: PermissionKind, key: bytes, range_end: bytes) -> authpb.Permission:
    return authpb.Permission(perm_type=authpb.PermissionType(kind.value), key=key, range_end=range_end)
