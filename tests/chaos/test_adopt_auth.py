"""spec.adopt of a cluster with etcd auth on, on real etcd processes, locally: a one-member cluster
started by hand, with a root user and auth enabled through etcd's API, is refused by name before
any member joins; nothing changes in it (membership, auth, users) while the supervisor keeps
looking; once auth is turned off there, the adoption goes on and keeps every key.

Three ways etcd says it: over plain HTTP it refuses AuthStatus and even the member list ("user
name is empty"); over TLS the supervisor's certificate names a user the old cluster does not
have ("user name not found"), while the member list is answered; and where the old cluster has
a root user of the supervisor's name, AuthStatus answers "on": the auth child could then turn
auth off there itself, and must not before the adoption began."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import trio

from actors.auth_plan import SUPERVISOR
from actors.model import ClusterRef, ClusterResource, ClusterSpec, ClusterStatus
from supervisor.etcd import EtcdClient, TlsFiles, open_etcd_client
from tests.chaos.lifecycle import is_healthy, open_local_supervisor
from tests.harness.adoption import adopt_spec, contents, write
from tests.harness.etcd import EtcdCluster, running_cluster
from tests.harness.etcd_versions import built_or_skip

REF = ClusterRef("default", "demo")
VERSION = ClusterSpec().version
ROOT = ("root", "root-password")
REFUSAL = "adopted only with auth off"


def root_client(old: EtcdCluster, tls: TlsFiles | None) -> AbstractAsyncContextManager[EtcdClient]:
    """A root user of the old cluster: by password over plain HTTP, by certificate (CN root) over TLS."""
    return open_etcd_client(list(old.endpoints), tls=tls, credentials=None if tls else ROOT)


async def enable_auth(old: EtcdCluster, tls: TlsFiles | None, *, supervisor_is_root: bool) -> None:
    async with open_etcd_client(list(old.endpoints), tls=tls) as etcd:
        await etcd.role_add("root")
        await etcd.user_add(*ROOT)
        await etcd.user_grant_role("root", "root")
        if supervisor_is_root:
            await etcd.user_add_without_password(SUPERVISOR)
            await etcd.user_grant_role(SUPERVISOR, "root")
        await etcd.auth_enable()


async def old_state(old: EtcdCluster, tls: TlsFiles | None) -> tuple[list[str], bool, tuple[str, ...]]:
    """The old cluster's member names, whether auth is on, its users: what must not change."""
    async with root_client(old, tls) as etcd:
        members = sorted(m.name for m in await etcd.member_list())
        return members, await etcd.auth_status(), tuple(sorted(await etcd.user_list()))


def refused(status: ClusterStatus) -> bool:
    return status.message.startswith("spec.adopt:") and REFUSAL in status.message


def only_new_member(status: ClusterStatus) -> bool:
    return is_healthy(status, 1) and all(m.name.startswith("demo-") for m in status.members)


@pytest.mark.parametrize(
    ("with_tls", "supervisor_is_root"),
    [(False, False), (True, False), (True, True)],
    ids=["plain", "tls", "tls-supervisor-root"],
)
async def test_a_cluster_with_auth_on_is_refused_untouched_and_adopted_once_auth_is_off(
    tmp_path: Path, with_tls: bool, supervisor_is_root: bool
) -> None:
    with running_cluster(
        built_or_skip(VERSION), tmp_path / "old", size=1, tls=with_tls, peer_tls=with_tls
    ) as old:
        tls, adopt = adopt_spec(old, tmp_path / "secrets")
        async with open_local_supervisor(tmp_path / "state", secrets_dir=tmp_path / "secrets") as sup:
            await write(old.endpoints, tls, 50)
            before = await contents(old.endpoints, tls)
            await enable_auth(old, tls, supervisor_is_root=supervisor_is_root)
            untouched = await old_state(old, tls)
            assert untouched[1]

            spec = ClusterSpec(size=1, tls_enabled=with_tls, adopt=adopt)
            await sup.fleet.apply([ClusterResource(REF, spec)])
            status = await sup.wait_for(REF, refused, timeout=30)
            said = "its auth is on" if not supervisor_is_root else "has etcd auth on"
            assert said in status.message and "spec.security.auth" in status.message, status.message
            await trio.sleep(3)  # ten looks of the cluster actor, and the auth child's first
            assert refused(sup.recorder.statuses[REF]), sup.recorder.statuses[REF]
            assert await sup.runtime.list_members(REF) == []
            assert await old_state(old, tls) == untouched  # auth still on, no member, no user
            steps = [(r, m) for ref, r, m in sup.recorder.events if ref == REF]
            assert not [s for s in steps if "Learner" in s[0] or s[0].startswith("Auth")], steps

            async with root_client(old, tls) as etcd:
                await etcd.auth_disable()
            done = await sup.wait_for(REF, only_new_member, timeout=120)
            new_urls = [m.client_url for m in done.members]
            assert await contents(new_urls, tls) == before
