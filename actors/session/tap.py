"""A transport wrapper that sees the CLI's raw frames before the SDK does.

The SDK's parser and control router lose things the session needs:

* **MCP elicitation.** The SDK answers the CLI's ``control_request{subtype:"elicitation"}`` with
  "Unsupported control request subtype", so the MCP server always sees ``cancel``. The tap takes
  those requests (and the CLI's ``control_cancel_request`` for them) out of the stream and hands
  them to the user-input broker, whose reply the session's input channel writes.
* **Frames the parser drops.** ``tool_use_summary`` (and any other top-level type the SDK does
  not know) would vanish; :func:`~claude_trio.protocol.session.frames.rewrite_unknown_frame` keeps
  them in order with everything else.
* **An exit we caused.** Once the session has ended and stops the CLI, the CLI's exit code
  (1 after an interrupted turn, -9 when killed) is expected: the tap ends the stream normally,
  so the SDK's reader does not log a "fatal error" for a stop the user asked for.
* **The hot path.** Message frames are handed to the session (:class:`FrameSink`) right here,
  in the SDK's reader task, instead of being queued in the SDK's stream for one more task to
  pick up. Control frames go on to the SDK's router, so ``can_use_tool``, hooks, SDK MCP servers
  and ``interrupt()`` work unchanged.

The tap runs inside the SDK's own (detached) reader task: it must not block for long. Handing an
elicitation to the broker is a ``send`` on a small bounded channel (elicitations are rare; a full
channel means the broker is stuck, and backpressure on the reader is then the right thing).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import trio
from claude_agent_sdk import ProcessError, Transport

from claude_trio.protocol.session.frames import SDK_ROUTED, rewrite_unknown_frame

ElicitationSink = Callable[[dict[str, Any]], Awaitable[None]]
CancelSink = Callable[[str], bool]


class FrameSink(Protocol):
    """Where message frames go (the session's hot path)."""

    def deliver(self, frame: dict[str, Any]) -> bool:
        """Map and queue one frame; True when the consumer is behind (call wait_writable)."""
        ...

    async def wait_writable(self) -> None: ...

    @property
    def exit_expected(self) -> bool:
        """The session is done with the CLI and is stopping it: however it exits is expected."""
        ...

    def output_ended(self) -> None:
        """The CLI closed its stdout (it exited, or is about to)."""
        ...


class TapTransport(Transport):
    """Wraps the real (or a scripted) transport; everything not named above passes through."""

    def __init__(
        self,
        inner: Transport,
        *,
        on_elicitation: ElicitationSink | None = None,
        on_cancel: CancelSink | None = None,
        sink: FrameSink | None = None,
    ) -> None:
        self.inner = inner
        self._on_elicitation = on_elicitation
        self._on_cancel = on_cancel
        self._sink = sink

    async def connect(self) -> None:
        await self.inner.connect()

    async def write(self, data: str) -> None:
        await self.inner.write(data)

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        return self._read()

    async def _read(self) -> AsyncIterator[dict[str, Any]]:  # noqa: ASYNC900 - Transport API
        # One generator (not one per concern): each frame the SDK pulls costs one step here.
        sink = self._sink
        try:
            async for frame in self.inner.read_messages():
                frame_type = frame.get("type")
                if sink is not None and frame_type not in SDK_ROUTED:
                    if sink.deliver(rewrite_unknown_frame(frame)):
                        await sink.wait_writable()
                    continue
                if frame_type == "control_request" and self._on_elicitation is not None:
                    request = frame.get("request")
                    if isinstance(request, dict) and request.get("subtype") == "elicitation":
                        await self._on_elicitation(frame)
                        continue
                elif frame_type == "control_cancel_request" and self._on_cancel is not None:
                    request_id = frame.get("request_id")
                    # The broker claims cancels of requests it owns; others go on to the SDK.
                    if isinstance(request_id, str) and self._on_cancel(request_id):
                        continue
                yield rewrite_unknown_frame(frame)
        except ProcessError:
            if sink is None or not sink.exit_expected:
                raise
        finally:
            if sink is not None:
                sink.output_ended()
        await trio.lowlevel.checkpoint()

    async def close(self) -> None:
        await self.inner.close()

    def is_ready(self) -> bool:
        return self.inner.is_ready()

    async def end_input(self) -> None:
        await self.inner.end_input()
