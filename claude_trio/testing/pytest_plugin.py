"""Pytest fixtures of the claude-trio testing kit.

Registered through the ``pytest11`` entry point ``claude_trio`` (installing claude-trio is enough);
without the entry point, add ``pytest_plugins = ["claude_trio.testing.pytest_plugin"]`` to a
``conftest.py``.

``scripted_session(script, "prompt")`` opens a real session over a fresh fake CLI in one line.
``model_double`` serves a scripted Messages API on 127.0.0.1 in the test's nursery (pytest-trio),
and ``hermetic`` is the env that points the real bundled CLI at it.
``redis_server`` runs a real ``redis-server`` on a free loopback port for the test, and
``redis_cluster`` a real three-master Redis Cluster (its ``url`` is ``redis+cluster://``).
``replay_cassette(path, **kwargs)`` is :func:`~claude_trio.testing.replay` (a transport
factory playing a cassette back) that fails the test at teardown when the test wrote what the
cassette did not record, or did not write what it did.
``event_contract`` records the event streams a test watches (``event_contract.watch()`` is an
observer for ``claude_trio.observe``) and checks them against the event contract at teardown;
:func:`assert_contract` checks one captured stream now. Both fail the test with every
violation, each with its seq.
``fake_cli_factory(responder, **kwargs)`` builds :class:`~claude_trio.testing.FakeCLI` objects and,
at teardown, fails the test if a script raised (the fake turned it into a CLI crash, which a
test might otherwise read as an expected error) or if a fake process was connected but never
closed (a leaked session).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest

from claude_trio.offline.hermetic import hermetic_env
from claude_trio.offline.model_double import ModelDouble, Script
from claude_trio.protocol.session.contract import contract_violations, describe_violations
from claude_trio.protocol.session.events import Event
from claude_trio.testing.cassette import Replay, replay
from claude_trio.testing.contract import ContractRecorder
from claude_trio.testing.fake_cli import FakeCLI
from claude_trio.testing.redis_cluster import RedisClusterNodes, open_redis_cluster
from claude_trio.testing.redis_server import RedisServer, open_redis_server

if TYPE_CHECKING:
    from claude_trio.actors.session.open import Session


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


class ScriptedSessions:
    """``async with scripted_session(script, "prompt", **open_session_kwargs) as session:``.

    A real :func:`~claude_trio.open_session` over a fresh :class:`FakeCLI` scripted by
    ``script`` (a responder or a list of them, one per turn). ``.fake`` is the last fake made,
    for asserting what reached the CLI. Run it under ``autojump_clock`` for exact virtual time.
    """

    def __init__(self, factory: FakeCLIFactory) -> None:
        self._factory = factory
        self.fake: FakeCLI | None = None

    @asynccontextmanager
    async def __call__(
        self,
        script: Any = None,
        prompt: str = "hello",
        *,
        fake_options: dict[str, Any] | None = None,
        **session_options: Any,
    ) -> AsyncIterator[Session]:
        from claude_trio import ExecuteParams, open_session

        self.fake = self._factory(script, **(fake_options or {}))
        params = session_options.pop("params", None) or ExecuteParams(prompt=prompt)
        async with open_session(params, transport_factory=self.fake, **session_options) as session:
            yield session


@pytest.fixture
def scripted_session(fake_cli_factory: FakeCLIFactory) -> ScriptedSessions:
    """A session on a scripted transport in one line (see :class:`ScriptedSessions`)."""
    return ScriptedSessions(fake_cli_factory)


@pytest.fixture
async def model_double(nursery: Any) -> AsyncIterator[ModelDouble]:
    """A :class:`ModelDouble` served in the test's nursery, with an empty script: set
    ``model_double.responder`` (e.g. ``turns(...)``) before starting the CLI. At teardown a CLI
    that kept asking beyond the script fails the test, with the requests it sent."""
    double = ModelDouble(Script([]))
    await nursery.start(double.serve)
    yield double
    double.check()


@pytest.fixture
async def redis_server(tmp_path: Any) -> AsyncIterator[RedisServer]:
    """A real ``redis-server`` on a free 127.0.0.1 port with its files under ``tmp_path``,
    keeping nothing on disk; stopped at teardown. ``redis_server.url`` is what to connect to."""
    async with open_redis_server(tmp_path / "redis") as server:
        yield server


@pytest.fixture
async def redis_cluster(tmp_path: Any) -> AsyncIterator[RedisClusterNodes]:
    """A real three-master Redis Cluster (no replicas) on free 127.0.0.1 ports, its files under
    ``tmp_path``, keeping nothing on disk; stopped at teardown. ``redis_cluster.url``
    (``redis+cluster://``) is what to connect to, with ``claude_trio.redis_url.open_redis``."""
    async with open_redis_cluster(tmp_path / "redis-cluster") as cluster:
        yield cluster


@pytest.fixture
def hermetic(model_double: ModelDouble, tmp_path: Any) -> dict[str, str]:
    """The env for a real CLI that talks only to ``model_double`` and keeps its files under
    ``tmp_path``; ``IS_SANDBOX=1`` so ``bypassPermissions`` also works as root."""
    return hermetic_env(model_double.base_url, tmp_path, sandbox=True)


def assert_contract(events: Iterable[Event], *, complete: bool = True) -> None:
    """Fail the test unless ``events`` (one execution's whole stream) keep the event contract
    (``claude_trio.testing.check_contract``), listing every violation with its seq."""
    __tracebackhide__ = True
    violations = contract_violations(events, complete=complete)
    if violations:
        pytest.fail(describe_violations(violations), pytrace=False)


@pytest.fixture
def event_contract() -> Iterator[ContractRecorder]:
    """A :class:`~claude_trio.testing.ContractRecorder`: ``event_contract.watch(name)`` is an
    observer that records one stream (``observe(session.events, event_contract.watch())``);
    at teardown every stream watched is checked and the test fails with every violation."""
    recorder = ContractRecorder()
    yield recorder
    problems = recorder.problems()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def replay_cassette() -> Iterator[Any]:
    """``replay_cassette(cassette, timing=..., patience=...)`` -> a
    :class:`~claude_trio.testing.Replay` for ``open_session(transport_factory=...)``; at
    teardown the test fails with the diff of every mismatch a replay found."""
    made: list[Replay] = []

    def make(cassette: Any, **kwargs: Any) -> Replay:
        player = replay(cassette, **kwargs)
        made.append(player)
        return player

    yield make
    problems = [mismatch for player in made for mismatch in player.mismatches]
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)
