"""After a refused step, hold off instead of retrying in a tight loop (pure policy).

etcd refuses some steps for a few seconds as a matter of course (a promotion of a learner not
yet in sync, say), so the first refusals hold off one tick each; a step refused again and
again backs off, doubling up to 16 ticks.
"""

from __future__ import annotations

from attrs import frozen

from supervisor.backoff import Backoff

# Refusals held off one tick each before the hold starts doubling.
STEADY_REFUSALS = 5
MAX_HOLD_TICKS = 16


@frozen
class HoldOff:
    refusals: int = 0
    until: float = float("-inf")

    def allows(self, now: float) -> bool:
        return now >= self.until

    def refused(self, now: float, tick: float) -> HoldOff:
        refusals = self.refusals + 1
        policy = Backoff(initial=tick, maximum=tick * MAX_HOLD_TICKS, multiplier=2.0, jitter=0.0)
        hold = policy.base_delay(max(0, refusals - STEADY_REFUSALS))
        return HoldOff(refusals, now + hold)
