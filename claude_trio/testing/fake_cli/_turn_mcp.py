"""Calls of in-process (SDK) MCP tools, the way the CLI makes them: each JSON-RPC message to the
server is an ``mcp_message`` control request; the first call of a server does the MCP
handshake; an interrupt abandons a running call with ``notifications/cancelled``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from claude_trio.testing import frames
from claude_trio.testing.fake_cli._control import PendingRequest
from claude_trio.testing.fake_cli._errors import SDKControlError
from claude_trio.testing.fake_cli._turn_core import TurnCore


class ToolCall(PendingRequest):
    """A ``tools/call`` in flight: :meth:`reply` gives the JSON-RPC response's ``result``
    (``{"content": [...], "isError": ...}``); :meth:`cancel` abandons it as the CLI does on
    an interrupt (MCP ``notifications/cancelled``, not a ``control_cancel_request``)."""

    server: str
    rpc_id: int

    async def reply(self) -> dict[str, Any]:
        """The call's result; ``SDKControlError`` for a JSON-RPC error (e.g. cancelled)."""
        payload = await super().reply()
        response = payload.get("mcp_response") or {}
        if "error" in response:
            raise SDKControlError(str(response["error"]))
        result = response.get("result")
        return result if isinstance(result, dict) else {}

    async def cancel(self) -> None:
        await trio.lowlevel.checkpoint()
        if self.cancelled or self.answered:
            return
        self.cancelled = True
        self._process._control.withdraw(self.request_id)
        self._done.set()
        request = self._process._control.open(
            frames.mcp_message_request(self.server, frames.mcp_cancelled(self.rpc_id))
        )
        await self._process._emit(frames.control_request(request.request_id, request.request))


class McpMixin(TurnCore):
    """The MCP methods of :class:`~claude_trio.testing.fake_cli.FakeTurn`."""

    async def mcp_message(self, server: str, message: Mapping[str, Any]) -> dict[str, Any]:
        """Send one JSON-RPC message to SDK MCP server ``server``; the SDK's answer payload
        (``{"mcp_response": ...}``)."""
        pending = self.process._control.open(frames.mcp_message_request(server, message))
        self._requests.append(pending)
        await self._emit(frames.control_request(pending.request_id, pending.request))
        return await pending.reply()

    async def _mcp_handshake(self, server: str) -> None:
        process = self.process
        if server in process.mcp_ready:
            await trio.lowlevel.checkpoint()
            return
        answer = await self.mcp_message(server, frames.mcp_initialize(process._next_rpc_id()))
        if "error" in (answer.get("mcp_response") or {}):
            raise SDKControlError(f"MCP server {server!r} refused the handshake: {answer}")
        await self.mcp_message(server, frames.mcp_initialized())
        process.mcp_ready.add(server)

    async def send_tool_call(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        tool_use_id: str | None = None,
    ) -> ToolCall:
        """Call ``tool`` of SDK MCP server ``server`` (its name there, without the
        ``mcp__<server>__`` prefix) and return the call in flight. The first call of a server
        does the handshake first. An interrupt of the turn abandons the call."""
        await self._mcp_handshake(server)
        process = self.process
        rpc_id = process._next_rpc_id()
        message = frames.mcp_tool_call(
            rpc_id,
            tool,
            arguments,
            tool_use_id=tool_use_id or f"toolu_fake_{process._next_id()[-12:]}",
        )
        request_id = process._next_id()
        call = ToolCall(process, request_id, frames.mcp_message_request(server, message))
        call.server = server
        call.rpc_id = rpc_id
        process._control.adopt(call)
        self._requests.append(call)
        await self._emit(frames.control_request(request_id, call.request))
        return call

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        tool_use_id: str | None = None,
    ) -> dict[str, Any]:
        """:meth:`send_tool_call` and wait for its result (``{"content", "isError"}``)."""
        call = await self.send_tool_call(server, tool, arguments, tool_use_id=tool_use_id)
        return await call.reply()
