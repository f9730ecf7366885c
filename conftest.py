"""Settings for the whole suite (tests/ and docs/examples/).

Hypothesis's per-example deadline is a wall-clock time limit: on a shared machine running the
end-to-end tests in parallel it fails tests whose code is right. Tests here never assert
wall-clock times, so the deadline is off; the number of examples stays each test's own.
"""

from hypothesis import settings

settings.register_profile("claude-trio", deadline=None)
settings.load_profile("claude-trio")
