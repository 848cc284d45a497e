"""spec.adopt on real etcd processes, locally: a three-member cluster started by hand (not by the
supervisor), plain or with TLS, is taken over live under a client workload. With TLS the old
cluster's CA (given as directories, the local form of Secrets) signs the new members'
certificates, and the old clients' certificates keep working on the new members. New members
join it as learners and are promoted; with removeOld the old members then leave, leadership
moved off them first. Every key keeps its value and revision, the old members are no longer
members, and the clients' history (first against the old endpoints, then the new ones) is
linearizable (porcupine)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from actors.model import ClusterRef, ClusterResource, ClusterSpec, ClusterStatus
from tests.chaos.lifecycle import is_healthy, open_local_supervisor
from tests.harness.adoption import adopt_spec, contents, member_names, new_voters, write
from tests.harness.etcd import running_cluster
from tests.harness.etcd_versions import built_or_skip
from tests.harness.history import KvWorkload, checker_or_skip

REF = ClusterRef("default", "demo")
VERSION = ClusterSpec().version  # the old cluster runs what a new one would


def only_new_members(status: ClusterStatus) -> bool:
    return is_healthy(status, 3) and all(m.name.startswith("demo-") for m in status.members)


@pytest.mark.parametrize("with_tls", [False, True], ids=["plain", "tls"])
async def test_a_hand_started_cluster_is_adopted_live_and_its_old_members_leave(
    tmp_path: Path, with_tls: bool
) -> None:
    checker_or_skip()
    with running_cluster(
        built_or_skip(VERSION), tmp_path / "old", size=3, tls=with_tls, peer_tls=with_tls
    ) as old:
        old_urls = list(old.endpoints)
        tls, adopt = adopt_spec(old, tmp_path / "secrets")
        spec = ClusterSpec(size=3, tls_enabled=with_tls, adopt=adopt)
        workload = KvWorkload(endpoints=list(old_urls), tls=tls)
        async with open_local_supervisor(tmp_path / "state", secrets_dir=tmp_path / "secrets") as sup:
            await write(old_urls, tls, 300)
            before = await contents(old_urls, tls)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(workload.run)
                await workload.wait_for_more(50)
                await sup.fleet.apply([ClusterResource(REF, spec)])

                # The new members vote beside the old ones (which may begin to leave at once).
                grown = await sup.wait_for(REF, lambda s: len(new_voters(s)) == 3, timeout=120)
                workload.endpoints[:] = [*old_urls, *new_voters(grown)]

                done = await sup.wait_for(REF, only_new_members, timeout=120)
                new_urls = [m.client_url for m in done.members]
                workload.endpoints[:] = new_urls
                await workload.wait_for_more(50)
                nursery.cancel_scope.cancel()

            after = await contents(new_urls, tls)
            names = await member_names(new_urls, tls)
            events = [(reason, message) for ref, reason, message in sup.recorder.events if ref == REF]

    assert names == ["demo-0", "demo-1", "demo-2"]
    assert after == before  # every key, its value and its revision: the old cluster's data, no restore
    removed = [message for reason, message in events if reason == "MemberRemoved"]
    assert len(removed) == 3 and all("adopted" in message for message in removed), events
    verdict = await workload.check(tmp_path / "history")
    print(f"linearizability: {verdict.operations} operations checked")
    assert verdict.ok, verdict.report
    assert workload.history.count(kind="put", outcome="ok") > 0
