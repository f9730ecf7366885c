"""The session store's own settings (``DriverConfig.store_flush``, ``store_load_timeout``) reach
the SDK: the flush mode with the CLI's options, the load timeout with the resume's load."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing
from session_kit import CONFIG, collect

from claude_trio import DriverConfig, ExecuteParams, open_session
from claude_trio.actors.session import store_resume
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.testing import FakeCLI, FakeTurn


class Store:
    """A store the session never reaches (the fake CLI mirrors nothing)."""

    async def append(self, key: Any, entries: Any) -> None:
        raise AssertionError("not called")

    async def load(self, key: Any) -> None:
        raise AssertionError("not called")


async def say(cli: FakeTurn) -> None:
    await cli.text("ok")
    await cli.result()


async def test_the_store_settings_reach_the_sdk(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[Any] = []

    async def materialize(options: Any) -> None:
        await trio.lowlevel.checkpoint()
        loads.append(options)

    monkeypatch.setattr(store_resume, "materialize_resume_session", materialize)
    fake = FakeCLI(say)
    started: list[Any] = []

    def factory(options: Any) -> Any:
        started.append(options)
        return fake(options)

    config = attrs.evolve(CONFIG, store_flush="eager", store_load_timeout=2.5)
    params = ExecuteParams(prompt="hi", resume_session_id="s1")
    store: Any = Store()
    async with open_session(
        params, transport_factory=factory, session_store=store, config=config
    ) as session:
        await collect(session)
    (options,) = started
    assert options.session_store_flush == "eager"
    (load,) = loads
    assert load.load_timeout_ms == 2500
    assert load.resume == "s1"


def test_the_defaults_are_the_sdks() -> None:
    assert (DriverConfig().store_flush, DriverConfig().store_load_timeout) == ("batched", 60.0)


def test_a_bad_flush_mode_names_the_field() -> None:
    with pytest.raises(InvalidParamsError) as info:
        DriverConfig(store_flush="sometimes")  # type: ignore[arg-type]
    assert info.value.field == "store_flush"
