"""Live controls over the gateway (real websockets on 127.0.0.1, fake CLIs): ``set_model`` and
``set_permission_mode`` through the client, under the server's read-only policy, and refused
once the execution has ended."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from gateway_kit import TOKEN, gateway

from claude_trio import ExecuteParams
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.errors import RemoteOpError
from claude_trio.protocol.fanout.remote import RemotePolicy
from claude_trio.protocol.fanout.wire import decode_op, encode_op
from claude_trio.protocol.session.events import ControlApplied, Event, Result, TurnStarted
from claude_trio.testing import FakeCLI, FakeTurn

FAST = ClientConfig(ping_interval=5, ping_timeout=5)


def sent(fleet_fake: FakeCLI, subtype: str) -> list[Any]:
    return [
        f["request"]
        for transport in fleet_fake.transports
        for f in transport.control_requests
        if f["request"].get("subtype") == subtype
    ]


async def run_controls(policy: str) -> tuple[FakeCLI, list[Event], dict[str, Any]]:
    proceed = trio.Event()

    async def script(cli: FakeTurn) -> None:
        await cli.text("working")
        await proceed.wait()
        await cli.text("done")

    fake = FakeCLI(script)
    outcome: dict[str, Any] = {}
    with trio.fail_after(20):
        async with (
            gateway(fake, allowed_origins=None, remote_tools=policy) as (_fleet, port),
            connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN, config=FAST) as gw,
        ):
            session = await gw.open(ExecuteParams(prompt="hi"))
            events: list[Event] = []
            async for event in session.events:
                events.append(event)
                if isinstance(event, TurnStarted):
                    await session.set_model("opus-4.6")
                    for mode in ("plan", "bypassPermissions"):
                        try:
                            await session.set_permission_mode(mode)  # type: ignore[arg-type]
                        except RemoteOpError as exc:
                            outcome[mode] = exc
                    with pytest.raises(RemoteOpError) as bad:
                        await session.set_model("gpt-4")
                    outcome["bad model"] = bad.value
                    proceed.set()
            with pytest.raises(RemoteOpError) as late:
                await session.set_model("opus")
            outcome["late"] = late.value
    return fake, events, outcome


async def test_set_model_and_set_permission_mode_over_the_gateway_read_only() -> None:
    fake, events, outcome = await run_controls("read-only")
    assert [r["model"] for r in sent(fake, "set_model")] == ["claude-opus-4-6"]
    # Read-only: plan goes through, a mode that runs tools without asking never reaches the CLI.
    assert [r["mode"] for r in sent(fake, "set_permission_mode")] == ["plan"]
    refused = outcome["bypassPermissions"]
    assert refused.code == "forbidden_field"
    assert "read-only" in refused.message
    assert outcome["bad model"].code == "invalid_field"
    assert "unknown model alias" in outcome["bad model"].message
    assert outcome["late"].code == "control_refused"
    assert "the execution has ended" in outcome["late"].message
    applied = [(e.control, e.value) for e in events if isinstance(e, ControlApplied)]
    assert applied == [("set_model", "claude-opus-4-6"), ("set_permission_mode", "plan")]
    assert isinstance(events[-1], Result)


async def test_an_operator_who_allows_all_tools_lets_clients_switch_to_any_mode() -> None:
    fake, events, outcome = await run_controls("all")
    assert [r["mode"] for r in sent(fake, "set_permission_mode")] == [
        "plan",
        "bypassPermissions",
    ]
    modes = [e.value for e in events if isinstance(e, ControlApplied)][1:]
    assert modes == ["plan", "bypassPermissions"]
    assert "bypassPermissions" not in outcome


def test_the_control_ops_round_trip_and_bad_ones_are_refused_naming_the_field() -> None:
    from claude_trio.errors import WireError
    from claude_trio.protocol.fanout.wire import SetModelOp, SetPermissionModeOp

    for op in (
        SetModelOp(id="1", session="s", model="opus"),
        SetModelOp(id="2", session="s", model=None),
        SetPermissionModeOp(id="3", session="s", mode="plan"),
    ):
        assert decode_op(encode_op(op)) == op
    cases = {
        '{"op": "set_model", "id": "1", "session": "s"}': "missing_field",
        '{"op": "set_model", "id": "1", "session": "s", "model": 3}': "invalid_field",
        '{"op": "set_model", "id": "1", "session": "s", "model": "a\\u0000b"}': "invalid_params",
        '{"op": "set_permission_mode", "id": "1", "session": "s", "mode": "yolo"}': (
            "invalid_field"
        ),
        '{"op": "set_permission_mode", "id": "1", "session": "s", "mode": "plan", "x": 1}': (
            "unknown_field"
        ),
    }
    for text, code in cases.items():
        with pytest.raises(WireError) as info:
            decode_op(text)
        assert info.value.code == code, text
        assert info.value.id == "1"


def test_a_read_only_policy_refuses_exactly_the_modes_that_run_tools_without_asking() -> None:
    from claude_trio.protocol.config.permissions import PERMISSION_MODES
    from claude_trio.protocol.fanout.remote import permission_mode_refusal

    read_only, everything = RemotePolicy(), RemotePolicy(tools="all")
    refused = [m for m in PERMISSION_MODES if permission_mode_refusal(read_only, m)]
    assert refused == ["acceptEdits", "bypassPermissions", "auto"]
    assert [m for m in PERMISSION_MODES if permission_mode_refusal(everything, m)] == []

