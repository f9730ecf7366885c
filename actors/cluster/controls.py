"""Live controls (``set_model``, ``set_permission_mode``) of a cluster session: a gateway
sends each as a command to the worker that runs the session (as it sends a push or an
answer), and that worker applies it to its local session and answers with an outcome.

Channels: none of its own (the worker's command stream and the reply list of
``actors/cluster/fleet.py``). Cancellation: as a push's command. Error handling: a refusal on
the worker (the execution ended, the CLI refused or did not answer) comes back as a refused
outcome and is raised here as ``ControlRefusedError`` or ``ControlFailedError``, as a local
session raises it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from claude_trio.protocol.cluster.records import Command, Outcome, SessionRecord
from claude_trio.protocol.errors import (
    ControlFailedError,
    ControlRefusedError,
    InvalidParamsError,
)

if TYPE_CHECKING:
    from claude_trio.actors.fanout.fleet_session import FleetSession
    from claude_trio.protocol.config.permissions import PermissionMode

__all__ = ["ClusterControls", "apply_control"]

_FAILED = "control failed: "


async def apply_control(local: FleetSession, command: Command) -> Outcome:
    """The worker's side: apply a live-control command to its local session."""
    await trio.lowlevel.checkpoint()
    try:
        if command.kind == "set_model":
            await local.set_model(command.answer)
        else:
            await local.set_permission_mode(command.answer)
    except ControlFailedError as exc:
        return Outcome(ok=False, reason=_FAILED + str(exc))
    except (ControlRefusedError, InvalidParamsError) as exc:
        return Outcome(ok=False, reason=str(exc))
    return Outcome(ok=True)


class ClusterControls:
    """The gateway's side: a cluster session's live controls (``LiveControls``). ``read``
    reads the session's record from Redis now; ``command`` sends a command to the worker
    named in a record and returns its outcome (``RedisFleet``'s)."""

    def __init__(
        self,
        session_id: str,
        read: Callable[[], Awaitable[SessionRecord]],
        command: Callable[[SessionRecord, Command], Awaitable[Outcome]],
    ) -> None:
        self._session_id = session_id
        self._read = read
        self._command = command

    async def set_model(self, model: str | None) -> None:
        """``Session.set_model`` on the worker that runs the session."""
        await self._send("set_model", model)

    async def set_permission_mode(self, mode: PermissionMode) -> None:
        """``Session.set_permission_mode`` on the worker that runs the session."""
        await self._send("set_permission_mode", mode)

    async def _send(self, kind: Any, value: object) -> None:
        record = await self._read()
        if record.state != "live":
            raise ControlRefusedError(
                f"{kind}: the execution "
                + ("has ended" if record.state == "ended" else "has not started yet")
            )
        outcome = await self._command(
            record, Command(kind=kind, session=self._session_id, reply="", answer=value)
        )
        if outcome.ok:
            return
        reason = outcome.reason or "refused"
        if reason.startswith(_FAILED):
            raise ControlFailedError(f"{kind}: {reason.removeprefix(_FAILED)}")
        raise ControlRefusedError(f"{kind}: {reason}")
