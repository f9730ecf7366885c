"""A subagent definition with the SDK's newer keys through the real CLI against the Messages
API double: the CLI accepts the definition (its own MCP server, mode, effort, memory, initial
prompt) and the subagent runs with its own tools and memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import dump, of_type, params, run_session

from claude_trio.protocol.config.subagents import SubagentDefinition
from claude_trio.protocol.session.events import Result, SubagentStarted
from claude_trio.testing.model_double import (
    ModelDouble,
    Reply,
    Rule,
    Script,
    is_main_agent,
    is_subagent,
)

pytestmark = pytest.mark.e2e


async def test_a_subagent_with_its_own_mode_effort_and_memory_runs(
    model_double: ModelDouble, hermetic: dict[str, str], tmp_path: Path
) -> None:
    checker = SubagentDefinition(
        description="Checks a file",
        prompt="You are the CHECKER.",
        disallowed_tools=["Write"],
        permission_mode="dontAsk",
        effort="low",
        memory="project",
        skills=[],
        mcp_servers=[{"nowhere": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}],
        initial_prompt="Read the file first.",
    )
    call = {"description": "check", "prompt": "check a.py", "subagent_type": "checker"}
    model_double.responder = Script(
        [
            Rule(
                reply=Reply.text("all good"),
                when=lambda r: is_subagent(r) and "CHECKER" in r.system_text,
            ),
            Rule(
                reply=Reply.tool_use("Agent", call, id="toolu_agent"),
                when=lambda r: is_main_agent(r) and not r.tool_results,
            ),
            Rule(reply=Reply.text("done"), when=is_main_agent),
        ]
    )
    events = await run_session(params(tmp_path, "check", subagents={"checker": checker}), hermetic)

    assert of_type(events, SubagentStarted), dump(events)
    [request] = [r for r in model_double.message_requests if "CHECKER" in r.system_text]
    tools = {tool.get("name") for tool in request.body.get("tools", [])}
    assert "Write" not in tools
    assert "Read" in tools
    # memory="project": the CLI tells the subagent where its memory files live.
    assert ".claude/agent-memory/checker" in request.system_text
    assert isinstance(events[-1], Result)
