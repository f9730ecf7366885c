"""An editor for the tests of ``claude-trio acp``: the ``agent-client-protocol`` package's own
asyncio client connection, over the agent's stdio, recording what the agent sends."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
from acp import PROTOCOL_VERSION, schema
from acp.stdio import spawn_agent_process

COMMAND = (sys.executable, "-m", "claude_trio.cli", "acp")


def agent_env(extra: Mapping[str, str] = {}) -> dict[str, str]:
    """This process's environment without any credential, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ANTHROPIC_") and key != "CLAUDE_CODE_OAUTH_TOKEN"
    }
    env.update(extra)
    return env


@attrs.define(eq=False)
class Editor:
    """The client side: every ``session/update`` kept in order; permission requests answered
    with ``choose(request)`` (an option id, or None to leave it pending until cancelled)."""

    choose: Callable[[schema.RequestPermissionRequest], str | None] = lambda _r: "allow"
    #: when given, answers instead of ``choose`` (whenever it returns)
    choose_async: Callable[[schema.RequestPermissionRequest], Awaitable[str]] | None = None
    updates: list[tuple[str, Any]] = attrs.field(factory=list)
    permissions: list[schema.RequestPermissionRequest] = attrs.field(factory=list)
    asked: asyncio.Event = attrs.field(factory=asyncio.Event)
    tool_started: asyncio.Event = attrs.field(factory=asyncio.Event)
    first_chunk: asyncio.Event = attrs.field(factory=asyncio.Event)

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        request = schema.RequestPermissionRequest(
            options=options, session_id=session_id, tool_call=tool_call
        )
        self.permissions.append(request)
        self.asked.set()
        option = (
            await self.choose_async(request)
            if self.choose_async is not None
            else self.choose(request)
        )
        if option is None:
            await asyncio.Event().wait()  # until cancelled
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=option)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        if isinstance(update, schema.ToolCallStart):
            self.tool_started.set()
        if isinstance(update, schema.AgentMessageChunk | schema.AgentThoughtChunk):
            self.first_chunk.set()

    def on_connect(self, conn: Any) -> None:
        pass

    def kinds(self) -> list[str]:
        return [update.session_update for _sid, update in self.updates]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(
            update.content.text
            for _sid, update in self.updates
            if update.session_update == kind and isinstance(update.content, schema.TextContentBlock)
        )


@asynccontextmanager
async def open_agent(
    editor: Editor, *args: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[tuple[Any, schema.InitializeResponse]]:
    """``claude-trio acp ARGS`` started and initialized; yields the connection and its answer."""
    async with spawn_agent_process(editor, *COMMAND, *args, env=dict(env or agent_env())) as (
        conn,
        process,
    ):
        try:
            init = await asyncio.wait_for(
                conn.initialize(protocol_version=PROTOCOL_VERSION), timeout=60
            )
            yield conn, init
        finally:
            if process.returncode is None:
                process.terminate()
                await process.wait()


TOKEN = "a-token-chosen-on-purpose-0123456789"


@asynccontextmanager
async def open_server(*args: str) -> AsyncIterator[str]:
    """A real ``claude-trio serve --offline --port 0 ARGS``; yields its URL."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "claude_trio.cli",
        "serve",
        "--offline",
        "--port",
        "0",
        *args,
        env=agent_env({"CLAUDE_TRIO_TOKEN": TOKEN}),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        while True:
            line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
            assert line, "claude-trio serve ended before it listened"
            if "listening on ws://" in line:
                url = line.split("listening on ", 1)[1].strip()
                break
        yield url
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()
