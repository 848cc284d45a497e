"""The hypothesis profile of the property tests (tests/unit/test_plan_*.py).

Few examples, no deadline: the suite runs on two shared cores, where a slow example is the
machine's load, not a bug. Locally each run draws new worlds, so repeated runs keep exploring
(and a failure found is replayed first from .hypothesis/). Under CI=true the examples are
derived from each test's name (derandomize): CI never turns red on a change that did not cause
it, and a red CI is reproduced by running the same commit.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "local", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("ci", settings.get_profile("local"), derandomize=True, database=None)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "local")
