"""The day-2 capabilities on real etcd processes with spec.security.auth on (issue 33). A tenant
whose role reaches only its prefix writes and reads through its client certificate while the
supervisor takes a scheduled backup, an on-demand one and deltas and verifies them in a scratch
etcd (auth on there too: the backup holds etcd's auth store), defragments every member and rolls
them for an upgrade to the next minor (3.6 -> 3.7); porcupine checks the tenant's history. Then a
majority is lost with its data (rebuilt from the survivor), then every member (rebuilt from the
verified backup and its deltas): etcd's users and roles come back each time, the tenant keeps its
reach and nothing more, and the auth child goes on reconciling (a user added after the restore)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio

from actors.maintenance.actor import defrag_child
from actors.model import (
    DEFAULT_VERSION,
    AuthSpec,
    BackupPhase,
    BackupSpec,
    DefragSpec,
    DisasterRecoverySpec,
    EtcdBackup,
    EtcdBackupSpec,
    LocalStore,
    MaintenanceSpec,
    Permission,
    PermissionType,
    RecoveryMode,
    RecoveryPath,
    Role,
    RoleSpec,
    StoreSpec,
    UserSpec,
)
from supervisor.etcd import PermissionDenied, TlsFiles, open_etcd_client
from supervisor.local.backup_requests import LocalBackupRequests
from supervisor.local.backups import local_backups, local_store_opener
from supervisor.local.deltas import local_deltas
from tests.backup.test_backups_under_faults import NoEvents
from tests.chaos.lifecycle import follow_members, is_healthy, open_local_supervisor, resource, rolled_since
from tests.chaos.test_auth import reconciled, urls, user_tls, with_auth
from tests.chaos.test_quorum_recovery import (
    half_hourly_clock,
    lose,
    lose_all_once_deltas_reach,
    recovered,
    verified_revision,
)
from tests.harness.etcd_versions import built_or_skip, pinned
from tests.harness.history import KvWorkload, checker_or_skip
from tests.harness.poll import eventually

RW = PermissionType.READWRITE
TENANT_ROLE = RoleSpec("tenant", (Permission(RW, "/linearizability/", prefix=True),))
TENANT = UserSpec("tenant", ("tenant",), client_cert_secret="tenant-etcd-client")
NEXT = pinned("3.7")  # the default version's next minor
AUTH = AuthSpec(enabled=True, users=(TENANT,), roles=(TENANT_ROLE,))


async def test_backups_defrag_rollouts_and_recovery_from_a_backup_with_auth_on(tmp_path: Path) -> None:
    checker_or_skip()
    store = StoreSpec(local=LocalStore(str(tmp_path / "backups")))
    demo = with_auth(resource(size=3), AUTH, 1)
    every_half_hour = "*/30 * * * *"  # the clock below makes a half-hour pass every minute
    demo = attrs.evolve(
        demo,
        spec=attrs.evolve(
            demo.spec,
            backup=BackupSpec(schedule=every_half_hour, store=store, delta_period="1s"),
            maintenance=MaintenanceSpec(defrag=DefragSpec(schedule=every_half_hour)),
            disaster_recovery=DisasterRecoverySpec(RecoveryMode.AUTOMATIC),
        ),
    )
    clock = half_hourly_clock()
    requests = LocalBackupRequests(tmp_path / "state", NoEvents())

    def children(runtime):
        scratch = tmp_path / "scratch"
        return [
            local_backups(
                runtime,
                manifest_dir=tmp_path,
                scratch_dir=scratch,
                clock=clock,
                wake_every=0.5,
                requests=requests,
            ),
            local_deltas(runtime, manifest_dir=tmp_path, scratch_dir=scratch, clock=clock, verify_every=1.0),
            defrag_child(clock=clock, wake_every=0.3),
        ]

    stores = local_store_opener(tmp_path, {})
    etcd_dir = tmp_path / "etcd-builds"
    etcd_dir.mkdir()
    for version in (DEFAULT_VERSION, NEXT):
        (etcd_dir / version).symlink_to(built_or_skip(version).etcd.parent)
    async with open_local_supervisor(
        tmp_path / "state", children=children, stores=stores, etcd_dir=etcd_dir
    ) as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        await reconciled(sup, demo, "issued to tenant")
        tenant = user_tls(sup, demo, "tenant")
        workload = KvWorkload(endpoints=urls(status), tls=tenant, max_operations=100_000, call_timeout=15.0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            nursery.start_soon(follow_members, sup, demo.ref, workload)
            await workload.wait_for_more(50)

            # A scheduled backup, verified in a scratch etcd whose restored store has auth on.
            status = await sup.wait_for(demo.ref, lambda s: verified_revision(s) > 0, timeout=90)
            backup = status.backup.last_successful_backup
            # An on-demand backup (EtcdBackup), verified the same way.
            await requests.update([EtcdBackup("default", "now", EtcdBackupSpec("demo"))], [demo], {demo.ref})
            taken = await eventually(
                lambda: requests.get("default", "now"),
                lambda b: b is not None and b.status.phase.finished,
                within=60,
                what="the on-demand backup finished",
            )
            assert taken.status.phase is BackupPhase.SUCCEEDED and taken.status.verified, taken.status
            # A defragmentation round over every member (the same schedule).
            # Every member, whatever the order (a round that began under load may see its first
            # member again in the next round before the last is done).
            every = {"demo-0", "demo-1", "demo-2"}
            await sup.wait_for(demo.ref, lambda s: set(defragmented(sup, demo)) == every, timeout=120)
            await workload.wait_for_more(50)

            # A rolling restart for an upgrade to the next minor, one member at a time.
            events_before = len(sup.recorder.events)
            upgraded = attrs.evolve(demo, spec=attrs.evolve(demo.spec, version=NEXT), generation=2)
            await sup.fleet.apply([upgraded])
            await sup.wait_for(
                demo.ref,
                lambda s: (
                    is_healthy(s, 3)
                    and all(m.version == NEXT for m in s.members)
                    and s.version == NEXT.rsplit(".", 1)[0] + ".0"
                ),
                timeout=120,
            )
            steps = rolled_since(sup.recorder.events, events_before)
            assert sorted(n for r, n in steps if r == "MemberRolled") == ["demo-0", "demo-1", "demo-2"], steps
            await workload.wait_for_more(50)
            nursery.cancel_scope.cancel()
        verdict = await workload.check(tmp_path / "history")
        print(f"linearizability: {verdict.operations} operations checked")
        assert verdict.ok, verdict.report

        # A majority lost with its data: rebuilt from the survivor (--force-new-cluster keeps
        # its auth store), the tenant's writes and reach with it.
        status = sup.recorder.statuses[demo.ref]  # the rolled members' pids
        async with open_etcd_client(urls(status), tls=tenant, call_timeout=10) as app:
            await app.put(b"/linearizability/before-loss", b"kept")
        survivor = next(m.name for m in status.members if m.role is Role.FOLLOWER)
        lost = lose(sup, demo.ref, [m for m in status.members if m.name != survivor])
        status = await sup.wait_for(
            demo.ref, lambda s: is_healthy(s, 3) and not set(lost) & {m.id for m in s.members}, timeout=120
        )
        rec = status.last_recovery
        assert rec is not None and rec.path is RecoveryPath.SURVIVOR and rec.source == survivor, rec
        await tenant_reaches(urls(status), tenant, b"/linearizability/before-loss")

        # Every member lost with its data: rebuilt from the verified backup and its deltas (the
        # restore replays them in a scratch etcd whose store has auth on), auth store included.
        async with open_etcd_client(urls(status), tls=tenant, call_timeout=10) as app:
            reached = await app.put(b"/linearizability/last", b"kept")
        status = await lose_all_once_deltas_reach(sup, demo.ref, tmp_path / "backups", reached)
        rec = status.last_recovery
        assert rec is not None and rec.path is RecoveryPath.BACKUP, rec
        assert rec.revision >= reached > backup.revision, (rec, reached, backup)
        assert f"with its delta backups at revision {rec.revision}" in recovered(sup, demo.ref)[-1]
        await tenant_reaches(urls(status), tenant, b"/linearizability/last")

        # The auth child still reconciles the restored store: a user added after the restore.
        other = UserSpec("second", ("tenant",), client_cert_secret="second-etcd-client")
        auth = attrs.evolve(AUTH, users=(TENANT, other))
        await sup.fleet.apply(
            [attrs.evolve(upgraded, spec=attrs.evolve(upgraded.spec, auth=auth), generation=3)]
        )
        await reconciled(sup, demo, "add user second")
        async with open_etcd_client(
            urls(status), tls=user_tls(sup, demo, "second"), call_timeout=10
        ) as second:
            assert await second.get(b"/linearizability/last") == b"kept"


async def tenant_reaches(endpoints: list[str], tenant: TlsFiles, key: bytes) -> None:
    """The tenant's certificate reads `key` (written as b"kept") and nothing outside its prefix."""
    async with open_etcd_client(endpoints, tls=tenant, call_timeout=10) as app:
        assert await app.get(key) == b"kept"
        with pytest.raises(PermissionDenied):
            await app.get(b"/other/x")


def defragmented(sup, demo) -> list[str]:
    return [
        message.split()[1]
        for ref, reason, message in sup.recorder.events
        if ref == demo.ref and reason == "MemberDefragmented"
    ]
