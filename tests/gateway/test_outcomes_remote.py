"""A remote session's typed end and its tool-use summaries, through a real gateway and
``connect_gateway`` over 127.0.0.1 (real time: short, under ``fail_after``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio
from gateway_kit import TOKEN, gateway

from claude_trio import ExecuteParams
from claude_trio.client import connect_gateway
from claude_trio.events import Aborted, Event, Outcome, Result, ToolUse, ToolUseSummary
from claude_trio.testing import FakeCLI, FakeTurn


async def remote_events(script: Callable[[FakeTurn], Any], params: ExecuteParams) -> list[Event]:
    async with (
        gateway(FakeCLI(script), allowed_origins=None) as (_, port),
        connect_gateway(f"ws://127.0.0.1:{port}/", token=TOKEN) as gw,
    ):
        session = await gw.open(params)
        return [event async for event in session.events]


async def test_a_remote_run_timeout_arrives_as_its_outcome_with_its_phase() -> None:
    async def script(cli: FakeTurn) -> None:
        await cli.tool_use("Bash", {"command": "sleep 100"})
        await cli.sleep(100)

    with trio.fail_after(20):
        events = await remote_events(script, ExecuteParams(prompt="hi", run_timeout=0.5))
    terminal = events[-1]
    assert isinstance(terminal, Aborted)
    assert (terminal.outcome, terminal.phase) == (Outcome.RUN_TIMEOUT, "tools")
    assert terminal.reason == "run_timeout: the execution ran for 0.5 s"


async def test_a_remote_final_result_arrives_with_its_outcome_and_summaries_apart() -> None:
    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Read", {"file_path": "a.py"})
        await cli.tool_result(tool, "print('a')")
        await cli.tool_use_summary("Read a.py", [tool])
        await cli.result(subtype="error_max_turns")

    with trio.fail_after(20):
        events = await remote_events(script, ExecuteParams(prompt="hi"))
    terminal = events[-1]
    assert isinstance(terminal, Result)
    assert (terminal.final, terminal.outcome) == (True, Outcome.MAX_TURNS)
    assert [e.name for e in events if isinstance(e, ToolUse)] == ["Read"]
    [summary] = [e for e in events if isinstance(e, ToolUseSummary)]
    assert summary.summary == "Read a.py"
    assert len(summary.preceding_tool_use_ids) == 1
