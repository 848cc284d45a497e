"""The one backoff: exponential, capped, jittered so siblings do not retry in lockstep.

Used for restarts of supervised children, reconnects of Kubernetes watches, the cluster
actor's hold-off after a refused step and the restarts of a crash-looping member. Pure (no
event loop), so the domain's decisions can use it too.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import attrs


@attrs.frozen
class Backoff:
    initial: float = attrs.field(default=0.05, validator=attrs.validators.ge(0))
    maximum: float = attrs.field(default=5.0, validator=attrs.validators.ge(0))
    multiplier: float = attrs.field(default=2.0, validator=attrs.validators.ge(1))
    jitter: float = attrs.field(default=0.1, validator=[attrs.validators.ge(0), attrs.validators.le(1)])
    reset_after: float | None = attrs.field(default=None, kw_only=True)
    """Uptime after which a child's next failure starts again from `initial`.

    None means twice `maximum`: a child that outlived the longest delay was healthy, and its
    next crash is a fresh incident rather than the continuation of a crash loop.
    """

    @property
    def reset_threshold(self) -> float:
        return self.maximum * 2 if self.reset_after is None else self.reset_after

    def base_delay(self, attempt: int) -> float:
        """The delay before jitter for the `attempt`-th consecutive restart (0-based)."""
        # Compare exponents rather than computing huge powers that overflow.
        delay = self.initial
        for _ in range(attempt):
            delay *= self.multiplier
            if delay >= self.maximum:
                return self.maximum
        return min(delay, self.maximum)

    def delay(self, attempt: int, rng: random.Random) -> float:
        """base_delay(attempt) scaled by a factor drawn uniformly from [1 - jitter, 1 + jitter].

        Exactly one draw from `rng` per call, so a seeded rng makes the schedule reproducible.
        """
        factor = 1.0 + self.jitter * (2.0 * rng.random() - 1.0)
        return self.base_delay(attempt) * factor

    def delays(self, rng: random.Random) -> Iterator[float]:
        """delay(0), delay(1), ... forever: the waits between consecutive retries."""
        return (self.delay(attempt, rng) for attempt in itertools.count())
