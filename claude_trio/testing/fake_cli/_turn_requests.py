"""The control requests a fake turn sends to the SDK: permission prompts, MCP elicitations and
hook callbacks. Each ``send_*`` method returns a :class:`PendingRequest` at once; the plain
methods wait for the SDK's answer and return its payload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from claude_trio.testing import frames
from claude_trio.testing.fake_cli._control import PendingRequest
from claude_trio.testing.fake_cli._turn_core import TurnCore


class RequestsMixin(TurnCore):
    """The control-request methods of :class:`~claude_trio.testing.fake_cli.FakeTurn`."""

    async def send_request(self, request: Mapping[str, Any]) -> PendingRequest:
        """Send any control request to the SDK; returns the pending request to await/cancel."""
        pending = self.process._control.open(request)
        self._requests.append(pending)
        await self._emit(frames.control_request(pending.request_id, request))
        return pending

    async def send_permission_request(
        self,
        tool_name: str,
        input: Mapping[str, Any],
        *,
        tool_use_id: str | None = None,
        **extra: Any,
    ) -> PendingRequest:
        return await self.send_request(
            frames.can_use_tool_request(
                tool_name,
                input,
                tool_use_id=tool_use_id or f"toolu_fake_{self.process._next_id()[-12:]}",
                extra=extra,
            )
        )

    async def ask_permission(
        self,
        tool_name: str,
        input: Mapping[str, Any],
        *,
        tool_use_id: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A ``can_use_tool`` request; returns the SDK's answer, e.g. ``{"behavior": "allow",
        "updatedInput": {...}}``. Raises :class:`SDKControlError` if the SDK answered an error
        (e.g. no ``can_use_tool`` callback is set)."""
        pending = await self.send_permission_request(
            tool_name, input, tool_use_id=tool_use_id, **extra
        )
        return await pending.reply()

    async def send_elicitation(
        self, server: str, message: str, schema: Mapping[str, Any], *, mode: str = "form"
    ) -> PendingRequest:
        return await self.send_request(
            frames.elicitation_request(server, message, schema, mode=mode)
        )

    async def elicit(
        self, server: str, message: str, schema: Mapping[str, Any], *, mode: str = "form"
    ) -> dict[str, Any]:
        """An MCP ``elicitation`` request; returns ``{"action": ..., "content": ...}``. The bare
        SDK answers it with an error ("Unsupported control request subtype"), raised here as
        :class:`SDKControlError`; a transport-level answer is what makes it work."""
        pending = await self.send_elicitation(server, message, schema, mode=mode)
        return await pending.reply()

    async def hook_callback(
        self, callback_id: str, input: Mapping[str, Any], *, tool_use_id: str | None = None
    ) -> dict[str, Any]:
        """A ``hook_callback`` request for an id from ``process.hook_callback_ids``."""
        pending = await self.send_request(
            frames.hook_callback_request(callback_id, input, tool_use_id=tool_use_id)
        )
        return await pending.reply()
