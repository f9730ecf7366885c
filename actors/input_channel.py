"""The input channel: the only writer of user messages to the CLI's stdin.

stdin stays open for the whole session (closing it early breaks ``can_use_tool``, hooks and
in-process MCP servers: "Stream closed"). Every user message - the first prompt and each accepted
push - carries a uuid of ours, so the CLI's echo (``--replay-user-messages``) and the result's
``user_message_uuids`` tell us when it was consumed (see ``protocol/lifecycle.py``).

The decision "accepted or rejected" is made synchronously by the session against
``ExecutionLifecycle`` (one trio thread, no checkpoint in between: that is what closes the race
at the turn boundary); this actor only performs the writes, in order, one at a time, so that a
caller's cancellation can never cut a line in half.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

# Accepted-but-unwritten pushes are capped by the session (MAX_PENDING_PUSHES), so the inbox can
# hold every one of them and ``push`` never blocks on it.
MAX_PENDING_PUSHES = 64


@attrs.frozen(kw_only=True)
class OutgoingMessage:
    uuid: str
    text: str

    def frame(self) -> dict[str, Any]:
        return {
            "type": "user",
            "message": {"role": "user", "content": self.text},
            "parent_tool_use_id": None,
            "uuid": self.uuid,
        }


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


async def run_input_channel(
    write: Callable[[MessageStream], Awaitable[None]],
    inbox: trio.MemoryReceiveChannel[OutgoingMessage],
    *,
    on_write_failed: Callable[[OutgoingMessage, BaseException], None],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Write each message of ``inbox`` to the CLI, in order.

    Channels: owns and closes ``inbox`` (the session closes the send side when the execution
    ends). ``write`` is ``ClaudeSDKClient.query``.
    Cancellation: cancelled with the session's nursery; a write in progress is shielded and
    bounded so no half line ever reaches the CLI.
    Error handling: a failed write (the CLI is gone) is reported through ``on_write_failed`` and
    the loop goes on draining so every message gets reported; the driver reports the CLI's death.
    """
    task_status.started()
    with inbox:
        async for message in inbox:
            try:
                with trio.CancelScope(shield=True), trio.move_on_after(_WRITE_GRACE) as scope:
                    await write(MessageStream(message.frame()))
                if scope.cancelled_caught:
                    on_write_failed(message, TimeoutError("the CLI did not read its stdin"))
            except Exception as exc:
                on_write_failed(message, exc)


# stdin is a pipe with a 64 KiB kernel buffer; a CLI that does not drain it for this long is
# wedged, and the driver's deadlines will end the session.
_WRITE_GRACE = 10.0
