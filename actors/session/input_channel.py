"""The input channel: the only writer of what claude-trio sends to the CLI's stdin.

Two kinds of lines go through it, in the order they were queued: user messages (the first
prompt and each accepted push) and replies to the CLI's control requests that the SDK does not
answer itself (MCP elicitations, answered by the user-input broker). The SDK's own control
traffic (``initialize``, ``interrupt``, ``can_use_tool`` replies) it writes itself.

stdin stays open for the whole session (closing it early breaks ``can_use_tool``, hooks and
in-process MCP servers: "Stream closed"). Every user message carries a uuid of ours, so the
CLI's echo (``--replay-user-messages``) and the result's ``user_message_uuids`` tell us when it
was consumed (see ``protocol/session/lifecycle.py``).

The decision "accepted or rejected" is made synchronously by the session against
``ExecutionLifecycle`` (one trio thread, no checkpoint in between: that is what closes the race
at the turn boundary); this actor only performs the writes, one at a time, so that a caller's
cancellation can never cut a line in half. Once the execution is aborted or ended, user messages
still waiting are never written (``may_write``): the CLI must start no new turn after a stop.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import attrs
import trio

from claude_trio.protocol.config.images import ImageInput, message_content
from claude_trio.protocol.extensions.user_input import ControlReply

# Accepted-but-unwritten pushes are capped by the session (MAX_PENDING_PUSHES), so the inbox can
# hold every one of them and ``push`` never blocks on it.
MAX_PENDING_PUSHES = 64


@attrs.frozen(kw_only=True)
class OutgoingMessage:
    """A user message to write: the first prompt or an accepted push (with its images)."""

    uuid: str
    text: str
    images: tuple[ImageInput, ...] = ()

    def frame(self) -> dict[str, Any]:
        return {
            "type": "user",
            "message": {"role": "user", "content": message_content(self.text, self.images)},
            "parent_tool_use_id": None,
            "uuid": self.uuid,
        }


Outgoing: TypeAlias = OutgoingMessage | ControlReply


def user_message_frame(uuid: str, text: str) -> dict[str, Any]:
    return OutgoingMessage(uuid=uuid, text=text).frame()


class MessageStream:
    """The async iterable ``ClaudeSDKClient.query`` takes, over a fixed list of user messages.

    Not an async generator: those finalize outside any nursery when abandoned (trio #265).
    """

    def __init__(self, *frames: dict[str, Any]) -> None:
        self._frames = list(frames)

    def __aiter__(self) -> MessageStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        if not self._frames:
            raise StopAsyncIteration
        return self._frames.pop(0)


@attrs.frozen(kw_only=True)
class CLIWriter:
    """How the input channel writes: user messages through ``ClaudeSDKClient.query`` (the SDK
    stamps them), control replies as raw lines on the transport."""

    query: Callable[[MessageStream], Awaitable[None]]
    write_line: Callable[[str], Awaitable[None]]


async def run_input_channel(
    writer: CLIWriter,
    inbox: trio.MemoryReceiveChannel[Outgoing],
    *,
    may_write: Callable[[], bool],
    on_write_failed: Callable[[str, BaseException], None],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Write each item of ``inbox`` to the CLI, in order.

    Channels: owns and closes ``inbox`` (the session core closes the send side when the
    execution ends; what was queued before is still written, user messages excepted).
    Cancellation: cancelled with the session's nursery; a write in progress is shielded and
    bounded so no half line ever reaches the CLI.
    Error handling: a failed write (the CLI is gone) is reported through ``on_write_failed`` and
    the loop goes on draining; the driver reports the CLI's death.
    """
    task_status.started()
    with inbox:
        async for item in inbox:
            if isinstance(item, OutgoingMessage):
                if not may_write():
                    continue  # aborted or ended: it was reported as undelivered
                what = "a user message"
                write = writer.query(MessageStream(item.frame()))
            else:
                what = "a control reply"
                write = writer.write_line(json.dumps(item.frame()) + "\n")
            try:
                # Shielded from the session's cancellation, bounded by its own deadline.
                deadline = trio.current_time() + _WRITE_GRACE
                with trio.CancelScope(shield=True, deadline=deadline) as scope:
                    await write
                if scope.cancelled_caught:
                    on_write_failed(what, TimeoutError("the CLI did not read its stdin"))
            except Exception as exc:
                on_write_failed(what, exc)


# stdin is a pipe with a 64 KiB kernel buffer; a CLI that does not drain it for this long is
# wedged, and the driver's deadlines will end the session.
_WRITE_GRACE = 10.0
