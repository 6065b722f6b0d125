"""Hypothesis settings profiles of eaglefuzz.

``ci`` (the default): 60 examples per test item and no example database; the tests give every
run an explicit seed (``--eaglefuzz-seed``, default 0), so every run and machine draws the same
cases; finishes the suite in minutes on 2 CPU cores under the Triton interpreter. ``dev``: more examples, random, with the database. ``thorough``: long runs.
``quick``: ``ci`` without Hypothesis's shrinking (a failure is reported as first drawn), for
the test suite's nested pytest runs, whose point is the plugin's plumbing, not the search.
Deadlines are off everywhere: interpreter steps and JIT warm-up make timings meaningless.
"""

from hypothesis import HealthCheck, Phase, settings

_COMMON = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    print_blob=False,
)

PROFILES = {
    "ci": settings(max_examples=60, database=None, **_COMMON),
    "dev": settings(max_examples=150, **_COMMON),
    "thorough": settings(max_examples=3000, **_COMMON),
    "quick": settings(max_examples=60, database=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
                      **_COMMON),
}
DEFAULT_PROFILE = "ci"


def register_profiles() -> None:
    """Register every profile with Hypothesis (idempotent)."""
    for name, s in PROFILES.items():
        settings.register_profile(name, s)
