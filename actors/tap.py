"""A transport wrapper that sees the CLI's raw frames before the SDK does.

The SDK's parser and control router lose three things we need (see ``sdk-facts.md``):

* **MCP elicitation.** The SDK answers the CLI's ``control_request{subtype:"elicitation"}`` with
  "Unsupported control request subtype", so the MCP server always sees ``cancel``. The tap takes
  those requests (and the CLI's ``control_cancel_request`` for them) out of the stream, hands them
  to the user-input broker, and writes the ``control_response`` itself.
* **Frames the parser drops.** ``tool_use_summary`` (and any other top-level type the SDK does
  not know) would vanish. The tap rewrites them into ``system`` frames with subtype
  ``tool_use_summary`` / ``passthrough:<type>`` carrying the original frame, so they stay in
  order with everything else and reach the mapper as ``SystemMessage``.
* **The last stdout lines before a crash** are not kept anywhere; the driver names the exit code
  and the CLI's last stderr lines instead (collected through ``options.stderr``).

The tap runs inside the SDK's own (detached) reader task: it must not block for long. Handing an
elicitation to the broker is a ``send`` on a small bounded channel (elicitations are rare; a full
channel means the broker is stuck, and backpressure on the reader is then the right thing).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from claude_agent_sdk import Transport

# Top-level frame types the SDK's parser (0.2.189) understands, or routes itself.
_KNOWN_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "result",
        "stream_event",
        "rate_limit_event",
        "conversation_reset",
        "control_request",
        "control_response",
        "control_cancel_request",
        "transcript_mirror",
        "keep_alive",
    }
)

ElicitationSink = Callable[[dict[str, Any]], Awaitable[None]]
CancelSink = Callable[[str], bool]

# Frames the SDK's own router needs (the control protocol); every other frame is a message.
_SDK_ROUTED = frozenset(
    {"control_request", "control_response", "control_cancel_request", "transcript_mirror"}
)


class FrameSink(Protocol):
    """Where message frames go when the tap delivers them itself (the session's hot path)."""

    def deliver(self, frame: dict[str, Any]) -> bool:
        """Map and queue one frame; True when the consumer is behind (call wait_writable)."""
        ...

    async def wait_writable(self) -> None: ...


def rewrite_unknown_frame(frame: dict[str, Any]) -> dict[str, Any]:
    """Turn a frame the SDK would drop into a ``system`` frame that keeps it (pure)."""
    frame_type = frame.get("type")
    if not isinstance(frame_type, str) or frame_type in _KNOWN_TYPES:
        return frame
    summary = frame_type == "tool_use_summary"
    subtype = frame_type if summary else f"passthrough:{frame_type}"
    rewritten = dict(frame)
    rewritten["type"] = "system"
    rewritten["subtype"] = subtype
    rewritten["original_frame"] = frame
    return rewritten


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
        sink = self._sink
        async for frame in self.inner.read_messages():
            frame_type = frame.get("type")
            if sink is not None and frame_type not in _SDK_ROUTED:
                # The hot path: mapped right here, in the SDK's reader task, instead of being
                # queued in the SDK's stream for one more task to pick up (see driver.py).
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

    async def send_control_response(
        self, request_id: str, response: dict[str, Any] | None, *, error: str | None = None
    ) -> None:
        """Answer a control request the SDK never saw (an elicitation)."""
        if error is not None:
            body: dict[str, Any] = {"subtype": "error", "request_id": request_id, "error": error}
        else:
            body = {"subtype": "success", "request_id": request_id, "response": response or {}}
        await self.inner.write(json.dumps({"type": "control_response", "response": body}) + "\n")

    async def close(self) -> None:
        await self.inner.close()

    def is_ready(self) -> bool:
        return self.inner.is_ready()

    async def end_input(self) -> None:
        await self.inner.end_input()
