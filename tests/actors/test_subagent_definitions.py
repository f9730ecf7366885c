"""A session's subagent definitions as the CLI gets them: the ``agents`` of the SDK's
``initialize`` request, over the fake CLI, with every key of the SDK's ``AgentDefinition``."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from session_kit import collect, fake_session

from claude_trio import ExecuteParams, SubagentDefinition
from claude_trio.protocol.session.events import AdapterReady
from claude_trio.testing import FakeCLI


async def test_every_key_reaches_the_cli_s_agents_json(
    autojump_clock: trio.testing.MockClock,
) -> None:
    reviewer = SubagentDefinition(
        description="Reviews diffs",
        prompt="You review.",
        tools=["Read"],
        disallowed_tools=["Bash"],
        model="haiku",
        max_turns=4,
        background=True,
        permission_mode="default",
        effort=7,
        skills=["lint-rules"],
        memory="local",
        mcp_servers=["github", {"tracker": {"type": "http", "url": "https://t.example/mcp"}}],
        initial_prompt="Start with the diff.",
    )
    params = ExecuteParams(
        prompt="hi", permission_mode="default", subagents={"reviewer": reviewer}
    )

    async def answer(request: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return "allow"

    fake = FakeCLI(lambda cli: cli.text("ok"))
    async with fake_session(fake, params=params, on_user_input=answer) as session:
        events = await collect(session)
    sent = fake.transports[0].initialize_request
    assert sent is not None
    assert sent["agents"] == {
        "reviewer": {
            "description": "Reviews diffs",
            "prompt": "You review.",
            "tools": ["Read"],
            "disallowedTools": ["Bash"],
            "model": "haiku",
            "maxTurns": 4,
            "background": True,
            "permissionMode": "default",
            "effort": 7,
            "skills": ["lint-rules"],
            "memory": "local",
            "mcpServers": [
                "github",
                {"tracker": {"type": "http", "url": "https://t.example/mcp"}},
            ],
            "initialPrompt": "Start with the diff.",
        }
    }
    [ready] = [e for e in events if isinstance(e, AdapterReady)]
    assert ready.subagents == ("reviewer",)
