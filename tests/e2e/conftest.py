"""Fixtures for end-to-end tests: the Messages API double and the hermetic CLI env.

``model_double`` serves a :class:`ModelDouble` in the test's nursery (pytest-trio runs fixtures
and the test in one nursery). Its responder starts empty; a test sets ``model_double.responder``
(a :class:`Script` from ``turns(...)`` or any function) before it starts the CLI. At teardown a
runaway CLI fails the test with the list of requests beyond the script.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from claude_trio.testing.hermetic import hermetic_env
from claude_trio.testing.model_double import ModelDouble, Script


@pytest.fixture
async def model_double(nursery: trio.Nursery) -> AsyncIterator[ModelDouble]:
    double = ModelDouble(Script([]))
    await nursery.start(double.serve)
    yield double
    double.check()


@pytest.fixture
def hermetic(model_double: ModelDouble, tmp_path: Path) -> dict[str, str]:
    """The env for a CLI talking only to ``model_double``; IS_SANDBOX=1 since tests run as root."""
    return hermetic_env(model_double.base_url, tmp_path, sandbox=True)
