"""The pinned tool list against the bundled CLI: the ``tools`` of its ``init`` frame.

``protocol/config/tools.py`` pins :data:`CLI_TOOLS` (every built-in tool the bundled CLI
reports) and :data:`CONDITIONAL_TOOLS` (those it reports only in some configurations). Each test
here starts the real bundled CLI against the Messages API double in one configuration and
checks that what its ``init`` frame lists is exactly what the pinned data says for it; a CLI
upgrade that adds, drops or renames a tool fails here first.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
from helpers import params, run_session

from claude_trio.actors.session.open import Session
from claude_trio.offline.hermetic import bundled_cli_path
from claude_trio.protocol.config.options import DEFAULT_ENV
from claude_trio.protocol.config.tools import CLI_TOOLS, CONDITIONAL_TOOLS, SCHEDULING_TOOLS
from claude_trio.protocol.session.events import Event, TurnStarted
from claude_trio.testing.model_double import ModelDouble, Reply, Rule, Script, is_main_agent, turns

pytestmark = pytest.mark.e2e

TASKS = {"TaskCreate", "TaskGet", "TaskList", "TaskUpdate"}


def reported_builtins(tools: object) -> set[str]:
    """The built-in tools of an ``init`` frame's ``tools`` (MCP tools left out)."""
    assert isinstance(tools, list), tools
    return {str(name) for name in tools if not str(name).startswith("mcp__")}


async def init_tools_of_a_session(execute: Any, env: dict[str, str], **kwargs: Any) -> set[str]:
    """Run one execution through ``open_session``; the tools of its first ``init`` frame."""
    seen: list[set[str]] = []

    async def watch(_session: Session, event: Event) -> None:
        await trio.lowlevel.checkpoint()
        if isinstance(event, TurnStarted) and not seen:
            assert event.raw is not None
            seen.append(reported_builtins(event.raw.data.get("tools")))

    await run_session(execute, env, on_event=watch, **kwargs)
    assert seen, "no init frame"
    return seen[0]


async def test_the_bare_cli_reports_every_unconditional_tool_scheduling_ones_included(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    """Without the library's options (which always deny the scheduling tools) but with its
    default environment (the todo tools on), the CLI reports exactly the pinned tools that need
    no condition."""
    model_double.responder = turns(Reply.text("ok"))
    work = tmp_path / "bare"
    work.mkdir()
    with trio.fail_after(60):
        done = await trio.run_process(
            [str(bundled_cli_path()), "-p", "hi", "--output-format", "stream-json", "--verbose"],
            env={**os.environ, **DEFAULT_ENV, **hermetic},
            cwd=str(work),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    frames = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    inits = [f for f in frames if f.get("type") == "system" and f.get("subtype") == "init"]
    assert inits, done.stderr.decode()[-2000:]
    assert reported_builtins(inits[0]["tools"]) == CLI_TOOLS - set(CONDITIONAL_TOOLS)
    assert set(SCHEDULING_TOOLS) <= CLI_TOOLS


async def test_a_session_that_can_ask_and_has_a_schema_reports_those_tools_too(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    model_double.responder = Script(
        [
            Rule(
                reply=Reply.tool_use("StructuredOutput", {"answer": 42}),
                when=lambda r: is_main_agent(r) and not r.tool_results,
            ),
            Rule(reply=Reply.text("done"), when=is_main_agent),
        ]
    )
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}}
    execute = params(tmp_path, "6 x 7?", output_schema=schema)
    reported = await init_tools_of_a_session(execute, hermetic, on_user_input="manual")
    expected = CLI_TOOLS - set(SCHEDULING_TOOLS) - {"TodoWrite"}
    assert reported == expected
    assert {"AskUserQuestion", "EnterPlanMode", "ExitPlanMode", "StructuredOutput"} <= reported


async def test_todo_write_replaces_the_task_tools_and_a_disallowed_monitor_is_gone(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    """``CLAUDE_CODE_ENABLE_TASKS=0`` brings TodoWrite back in place of the Task* family; and
    ``disallowed_tools=["Monitor"]`` (once refused as unknown) takes Monitor away."""
    model_double.responder = turns(Reply.text("ok"))
    execute = params(tmp_path, "hi", disallowed_tools=["Monitor"])
    reported = await init_tools_of_a_session(
        execute, {**hermetic, "CLAUDE_CODE_ENABLE_TASKS": "0"}
    )
    conditional_off = set(CONDITIONAL_TOOLS) - {"TodoWrite"}
    expected = CLI_TOOLS - set(SCHEDULING_TOOLS) - conditional_off - TASKS - {"Monitor"}
    assert reported == expected
    assert "TodoWrite" in reported
