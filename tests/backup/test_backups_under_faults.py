"""On-demand backups while the cluster changes under them, with clients writing and reading all
along: a backup whose source member is killed while it runs, and one asked for as the cluster
scales from 3 to 5. Each backup ends Succeeded and verified (after failed attempts, retried, if
its source went away), the cluster keeps serving, and the clients' history is linearizable.
And backups that cannot be taken: no store at all (Failed at once), a store that fails (Failed
after three attempts, each one an Event)."""

import json
import os
import signal

import attrs
import trio

from actors.model import (
    BackupPhase,
    BackupSpec,
    EtcdBackup,
    EtcdBackupSpec,
    LocalStore,
    Role,
    StoreSpec,
)
from supervisor.backoff import Backoff
from supervisor.etcd.client import open_etcd_client
from supervisor.local.backup_requests import LocalBackupRequests
from supervisor.local.backups import local_backups
from tests.chaos.lifecycle import follow_members, open_local_supervisor, resource
from tests.harness.history import KvWorkload
from tests.harness.poll import eventually


def on_demand(tmp_path, requests):
    """The backup child, taking the on-demand backups of `requests`, waking and retrying fast."""

    def children(runtime):
        return [
            local_backups(
                runtime, manifest_dir=tmp_path, scratch_dir=tmp_path / "scratch", wake_every=0.2,
                retry=QUICK_RETRY, requests=requests,
            )
        ]  # fmt: skip

    return children


class NoEvents:
    """Events of the backups themselves come from the actor; the requests record only a backup
    of an unknown cluster, which these tests have none of."""

    async def record(self, cluster, *, reason, message, warning=False, measured=None):
        raise AssertionError(f"unexpected event {reason}: {message}")


# Failed attempts are tried again within a second or two (the daemon waits 30 s, doubling).
QUICK_RETRY = Backoff(initial=1.0, maximum=2.0, multiplier=2.0, jitter=0.1)


async def test_backups_taken_through_a_member_kill_and_a_scale_up_succeed_and_clients_stay_linearizable(
    tmp_path,
):
    store = StoreSpec(local=LocalStore(str(tmp_path / "backups")))
    demo = resource("demo", size=3)
    demo = attrs.evolve(demo, spec=attrs.evolve(demo.spec, backup=BackupSpec(store=store)))
    state = tmp_path / "state"
    requests = LocalBackupRequests(state, NoEvents())

    async with open_local_supervisor(state, children=on_demand(tmp_path, requests)) as sup:
        wanted: list[EtcdBackup] = []

        async def ask(name: str, resources) -> None:
            wanted.append(EtcdBackup("default", name, EtcdBackupSpec("demo")))
            await requests.update(wanted, resources, {demo.ref})

        async def finished(name: str) -> EtcdBackup:
            return await eventually(
                lambda: requests.get("default", name),
                lambda b: b is not None and b.status.phase.finished,
                within=120,
                what=f"{name} finished",
            )

        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        workload = KvWorkload(endpoints=[m.client_url for m in status.members], max_operations=100_000)
        async with trio.open_nursery() as clients:
            clients.start_soon(workload.run)
            clients.start_soon(follow_members, sup, demo.ref, workload)
            await workload.wait_for_more(50)

            # Some bulk, so that a backup (snapshot, then a scratch restore) takes a while.
            async with open_etcd_client([m.client_url for m in status.members]) as etcd:
                for i in range(24):
                    await etcd.put(f"bulk-{i}".encode(), os.urandom(1_000_000))

            # Kill the member the snapshot comes from (the first follower by name) while the
            # backup runs: that attempt fails, and the next one, on another member, succeeds.
            await ask("during-kill", [demo])
            await eventually(
                lambda: requests.get("default", "during-kill"),
                lambda b: b.status.phase is BackupPhase.RUNNING,
                within=30,
                every=0.02,
                what="during-kill Running",
            )
            source = min((m for m in status.members if m.role is Role.FOLLOWER), key=lambda m: m.name)
            os.kill(source.pid, signal.SIGKILL)
            during_kill = await finished("during-kill")
            await workload.wait_for_more(50)

            bigger = attrs.evolve(demo, spec=attrs.evolve(demo.spec, size=5), generation=2)
            await sup.fleet.apply([bigger])
            await ask("during-scale", [bigger])
            during_scale = await finished("during-scale")
            await sup.wait_healthy(demo.ref, 5, timeout=120)
            await workload.wait_for_more(50)
            clients.cancel_scope.cancel()

    for backup in (during_kill, during_scale):
        assert backup.status.phase is BackupPhase.SUCCEEDED, backup.status
        assert backup.status.verified, backup.status
    assert during_scale.status.revision > during_kill.status.revision
    assert (await workload.check(tmp_path / "history")).ok
    reasons = sup.recorder.reasons(demo.ref)
    assert reasons.count("BackupStarted") == 2 and reasons.count("BackupSucceeded") == 2, reasons
    assert "BackupRetrying" in reasons, reasons  # the attempt the kill cut short


async def test_a_backup_with_no_store_fails_at_once_and_one_whose_store_breaks_fails_after_three_attempts(
    tmp_path,
):
    (tmp_path / "a-file").write_text("not a directory")
    broken = StoreSpec(local=LocalStore(str(tmp_path / "a-file" / "backups")))
    plain = resource("plain", size=1)  # no spec.backup: no store to default to
    state = tmp_path / "state"
    requests = LocalBackupRequests(state, NoEvents())

    async with open_local_supervisor(state, children=on_demand(tmp_path, requests)) as sup:
        await sup.fleet.apply([plain])
        await sup.wait_healthy(plain.ref, 1)
        storeless = EtcdBackup("default", "storeless", EtcdBackupSpec("plain"))
        doomed = EtcdBackup("default", "doomed", EtcdBackupSpec("plain", broken))
        await requests.update([storeless, doomed], [plain], {plain.ref})
        for name in ("storeless", "doomed"):
            await eventually(
                lambda name=name: requests.get("default", name),
                lambda b: b.status.phase.finished,
                within=60,
                what=f"{name} finished",
            )
        reasons = sup.recorder.reasons(plain.ref)
    storeless, doomed = requests.get("default", "storeless"), requests.get("default", "doomed")
    assert storeless.status.phase is BackupPhase.FAILED and "no store" in storeless.status.message
    assert doomed.status.phase is BackupPhase.FAILED, doomed.status
    assert doomed.status.message.startswith("3 attempts failed, the last: "), doomed.status.message
    assert reasons.count("BackupRetrying") == 2 and reasons.count("BackupFailed") == 2, reasons
    # Each status was written where local mode keeps it, in the CRD's shape.
    written = json.loads((state / "default" / "plain" / "backups" / "doomed.json").read_text())
    assert written["phase"] == "Failed" and written["message"] == doomed.status.message
