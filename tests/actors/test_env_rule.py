"""One rule for an environment, whoever takes it: ``ArchitectureConfig.custom_env``,
``open_session(env=)``, a fleet's ``env`` option, ``open_cli_pool(env=)`` and a gateway
client's ``open`` (protocol/checks.py, ``check_env``)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from session_kit import collect, fake_session

from claude_trio import ArchitectureConfig, ExecuteParams, InvalidParamsError, open_fleet
from claude_trio.actors.session.pool import open_cli_pool
from claude_trio.errors import WireError
from claude_trio.protocol.checks import MAX_ARGUMENT_BYTES
from claude_trio.protocol.fanout.wire import decode_op
from claude_trio.testing import FakeCLI

BAD_ENVS: list[tuple[Any, str]] = [
    ("A=1", "env"),
    ({"": "x"}, "env['']"),
    ({"A=B": "1"}, "env['A=B']"),
    ({"A": 1}, "env['A']"),
    ({"A": "x\x00y"}, "env['A']"),
    ({"B": "v" * MAX_ARGUMENT_BYTES}, "env['B']"),
]
IDS = ["not-a-mapping", "empty-name", "equals-in-name", "int-value", "nul", "too-large"]


async def _custom_env(env: Any) -> None:
    ArchitectureConfig(custom_env=env)


async def _session(env: Any) -> None:
    async with fake_session(FakeCLI(), env=env):
        pass  # pragma: no cover


async def _fleet(env: Any) -> None:
    async with open_fleet(env=env):
        pass  # pragma: no cover


async def _pool(env: Any) -> None:
    async with open_cli_pool(ExecuteParams(prompt="-"), env=env, transport_factory=FakeCLI()):
        pass  # pragma: no cover


TAKERS: dict[str, tuple[Callable[[Any], Awaitable[None]], str]] = {
    "custom_env": (_custom_env, "custom_env"),
    "open_session": (_session, "env"),
    "fleet": (_fleet, "env"),
    "pool": (_pool, "env"),
}


@pytest.mark.parametrize("taker", list(TAKERS))
@pytest.mark.parametrize(("env", "field"), BAD_ENVS, ids=IDS)
async def test_every_taker_refuses_the_same_environments_naming_the_entry(
    taker: str, env: Any, field: str
) -> None:
    take, name = TAKERS[taker]
    with pytest.raises(InvalidParamsError) as caught:
        await take(env)
    assert caught.value.field == name + field.removeprefix("env")


GOOD_ENV = {"EMPTY": "", "OPTS": "a=b", "K": "v" * (MAX_ARGUMENT_BYTES - len("K="))}


async def test_what_the_rule_accepts_reaches_the_cli() -> None:
    assert ArchitectureConfig(custom_env=GOOD_ENV).custom_env == GOOD_ENV
    fake = FakeCLI()
    async with fake_session(fake, env=GOOD_ENV) as session:
        await collect(session)
    env = fake.transports[0].options.env
    assert {name: env[name] for name in GOOD_ENV} == GOOD_ENV
    async with open_fleet(env=GOOD_ENV, transport_factory=FakeCLI()):
        pass
    async with open_cli_pool(ExecuteParams(prompt="-"), env=GOOD_ENV, transport_factory=FakeCLI()):
        pass


@pytest.mark.parametrize(("env", "field"), BAD_ENVS[1:], ids=IDS[1:])
def test_a_gateway_open_refuses_them_as_invalid_params_naming_the_entry(
    env: dict[str, Any], field: str
) -> None:
    op = {"op": "open", "id": "o", "params": {"prompt": "x", "architecture_config": {}}}
    op["params"]["architecture_config"]["custom_env"] = env  # type: ignore[index]
    with pytest.raises(WireError) as caught:
        decode_op(json.dumps(op), allow_env=True)
    assert caught.value.code == "invalid_params"
    where = "params.architecture_config.custom_env"
    # The wire names a NUL by its path; every other entry by the rule's own name.
    assert caught.value.message.startswith(where)
    assert len(caught.value.message) < 1000  # never the 128 KiB value itself
