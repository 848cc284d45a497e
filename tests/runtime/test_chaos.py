"""Crash random children for many simulated minutes; the tree must end healthy, with restart
counts that exactly match the injected faults."""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing

from supervisor.runtime import Backoff, ChildSpec, Handle, Intensity, Strategy, Supervisor, actor_child

from .helpers import Add, Counter, Crash, Get, Msg, count_tasks

STRATEGIES = {"s1": Strategy.ONE_FOR_ONE, "s2": Strategy.ONE_FOR_ALL, "s3": Strategy.REST_FOR_ONE}


@pytest.mark.parametrize("seed", range(5))
async def test_chaos(autojump_clock: trio.testing.MockClock, seed: int) -> None:
    rng = random.Random(seed)
    backoff = Backoff(initial=0.01, maximum=0.08, jitter=0.5)
    handles: dict[str, dict[str, Handle[Msg]]] = {}
    subs: dict[str, Supervisor] = {}
    for sub, strategy in STRATEGIES.items():
        specs = []
        handles[sub] = {}
        for i in range(1, 4):
            spec, handle = actor_child(f"{sub}c{i}", Counter)
            specs.append(spec)
            handles[sub][spec.id] = handle
        subs[sub] = Supervisor(
            sub,
            specs,
            strategy=strategy,
            intensity=Intensity(max_restarts=10, within=0.5),
            backoff=backoff,
            rng=random.Random(rng.random()),
        )
    top = Supervisor("top", [ChildSpec(name, sup.run) for name, sup in subs.items()], backoff=backoff)
    expected = {child: 0 for sub in handles.values() for child in sub}
    expected_totals = dict.fromkeys(subs, 0)
    faults = 0

    before = count_tasks()
    async with trio.open_nursery() as nursery:
        await nursery.start(top.run)
        end = trio.current_time() + 15 * 60
        while trio.current_time() < end:
            await trio.sleep(rng.uniform(1, 10))
            sub = rng.choice(sorted(subs))
            ids = list(handles[sub])
            if sub == "s1":  # independent children: crash several at the same instant
                victims = rng.sample(ids, rng.randint(1, 3))
                for victim in victims:
                    expected[victim] += 1
                expected_totals[sub] += len(victims)
            else:
                victims = [rng.choice(ids)]
                affected = ids if sub == "s2" else ids[ids.index(victims[0]) :]
                for child in affected:
                    expected[child] += 1
                expected_totals[sub] += 1
            for victim in victims:
                handles[sub][victim].send_nowait(Add(1))
                handles[sub][victim].send_nowait(Crash())
            faults += len(victims)
        await trio.sleep(1)

        assert faults > 100
        assert top.statistics().restarts_total == 0
        for name, sup in subs.items():
            stats = sup.statistics()
            assert stats.restarts_total == expected_totals[name]
            assert all(c.running for c in stats.children)
            assert {c.id: c.restarts for c in stats.children} == {c: expected[c] for c in handles[name]}
            for handle in handles[name].values():
                handle.send_nowait(Add(2))
                assert await handle.call(Get, timeout=1) == 2  # alive, and fresh since its last restart
                assert handle.statistics().depth == 0
        nursery.cancel_scope.cancel()
    assert count_tasks() == before
