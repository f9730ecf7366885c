"""Live controls: the session's requests to its running CLI (``Session.set_model``,
``set_permission_mode``, ``context_usage``, ``mcp_status``, ``rewind_files``).

Whether one may be sent now is ``protocol/extensions/controls.py``'s rule 2 (not after the end of
the execution, not while it is being stopped, not without a running CLI); each is bounded by
``DriverConfig.control_timeout`` (rule 3). Called from the session's caller only.

Channels: none of its own; the request goes through the connected SDK client (the stopper
holds it, ``actors/session/stopper.py``).
Cancellation: the caller's; a request cut short leaves the CLI as it was (the SDK drops the late
answer).
Error handling: ``ControlRefusedError`` when it may not be sent, ``ControlFailedError`` when the
CLI refuses it or does not answer in time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio
from claude_agent_sdk import ClaudeSDKClient

from claude_trio.actors.session.core import SessionCore
from claude_trio.protocol.errors import ControlFailedError, ControlRefusedError
from claude_trio.protocol.extensions.controls import control_refusal

T = TypeVar("T")


class LiveControls:
    """The live controls of one session (see the module docstring)."""

    def __init__(self, core: SessionCore) -> None:
        self._core = core

    def refusal(self) -> str | None:
        """Why a live control cannot be sent now (``protocol/extensions/controls.py``, rule 2)."""
        core = self._core
        machine = core.stopper.machine
        return control_refusal(
            ended=core.end.finished,
            aborting=core.lifecycle.aborting,
            cli_running=core.stopper.client is not None and not machine.exited,
            end_reason=core.lifecycle.end_reason,
        )

    async def control(
        self, name: str, request: Callable[[ClaudeSDKClient], Awaitable[T]]
    ) -> T:
        """Send one live control through the connected client, bounded by
        ``control_timeout`` (``protocol/extensions/controls.py``, rules 2 and 3)."""
        await trio.lowlevel.checkpoint()
        refusal = self.refusal()
        client = self._core.stopper.client
        if refusal is not None or client is None:
            raise ControlRefusedError(f"{name}: {refusal or 'the CLI is not running'}")
        timeout = self._core.config.control_timeout
        with trio.move_on_after(timeout):  # noqa: ASYNC912 - awaits inside
            try:
                return await request(client)
            except Exception as exc:
                raise ControlFailedError(f"{name}: the CLI refused it: {exc}") from exc
        raise ControlFailedError(
            f"{name}: the CLI did not answer within {timeout:g} s (DriverConfig.control_timeout)"
        )
