"""Pytest fixtures of the claude-trio testing kit.

Registered through the ``pytest11`` entry point ``claude_trio`` (installing claude-trio is enough);
without the entry point, add ``pytest_plugins = ["claude_trio.testing.pytest_plugin"]`` to a
``conftest.py``.

``fake_cli_factory(responder, **kwargs)`` builds :class:`~claude_trio.testing.FakeCLI` objects and,
at teardown, fails the test if a script raised (the fake turned it into a CLI crash, which a
test might otherwise read as an expected error) or if a fake process was connected but never
closed (a leaked session).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .fake_cli import FakeCLI


class FakeCLIFactory:
    """Makes ``FakeCLI`` objects and remembers them for the teardown checks."""

    def __init__(self) -> None:
        self.made: list[FakeCLI] = []

    def __call__(self, *args: Any, **kwargs: Any) -> FakeCLI:
        fake = FakeCLI(*args, **kwargs)
        self.made.append(fake)
        return fake

    def problems(self) -> list[str]:
        found = [f"fake CLI script raised: {e!r}" for f in self.made for e in f.script_errors]
        found += [
            f"fake CLI process {t.index} was connected but never closed"
            for f in self.made
            for t in f.transports
            if t.connected and not t.closed
        ]
        return found


@pytest.fixture
def fake_cli_factory() -> Iterator[FakeCLIFactory]:
    """``fake_cli_factory(responder, **FakeCLI kwargs) -> FakeCLI``, checked at teardown."""
    factory = FakeCLIFactory()
    yield factory
    problems = factory.problems()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def fake_cli(fake_cli_factory: FakeCLIFactory) -> FakeCLI:
    """A ``FakeCLI`` that answers every turn with ``"ok"``; set ``fake_cli.responder`` to script."""
    return fake_cli_factory()
