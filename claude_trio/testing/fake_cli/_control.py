"""The control protocol of the fake CLI, both ways.

The SDK's requests (``initialize``, ``interrupt``, ``mcp_status``, any other subtype) are answered
at once with ``success``, unless their subtype is in ``FakeCLI(unanswered=...)``; an
``interrupt`` also stops the running turn, ``set_model`` changes the model the next frames
report, and ``get_context_usage`` answers ``frames.context_usage_response()``. A script's own
requests (``FakeTurn.ask_permission``, ``elicit``, ``hook_callback``, ``send_request``) are
:class:`PendingRequest` objects, resolved by the SDK's ``control_response`` or withdrawn with
:meth:`PendingRequest.cancel`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import trio

from claude_trio.testing import frames
from claude_trio.testing.fake_cli._errors import RequestCancelledError, SDKControlError

if TYPE_CHECKING:
    from claude_trio.testing.fake_cli._transport import FakeTransport


class PendingRequest:
    """A control request the fake CLI sent to the SDK (``can_use_tool``, ``elicitation``, ...)."""

    def __init__(self, process: FakeTransport, request_id: str, request: dict[str, Any]) -> None:
        self._process = process
        self.request_id = request_id
        self.request = request
        self.response: dict[str, Any] | None = None
        self.cancelled = False
        self._done = trio.Event()

    @property
    def answered(self) -> bool:
        return self.response is not None

    def _resolve(self, response: dict[str, Any]) -> None:
        self.response = response
        self._done.set()

    async def reply(self) -> dict[str, Any]:
        """Wait for the SDK's answer; return its ``response`` payload.

        Raises :class:`SDKControlError` if the SDK answered ``error``, and
        :class:`RequestCancelledError` if the request was withdrawn first.
        """
        await self._done.wait()
        if self.response is None:
            raise RequestCancelledError(f"control request {self.request_id} was cancelled")
        if self.response.get("subtype") == "error":
            raise SDKControlError(str(self.response.get("error")))
        payload = self.response.get("response", {})
        return payload if isinstance(payload, dict) else {}

    async def cancel(self) -> None:
        """Withdraw the request: send ``control_cancel_request`` (as the CLI does on abort)."""
        await trio.lowlevel.checkpoint()
        if self.cancelled or self.answered:
            return
        self.cancelled = True
        self._process._control.withdraw(self.request_id)
        self._done.set()
        await self._process._emit(frames.control_cancel_request(self.request_id))


class ControlProtocol:
    """One fake process's side of the control protocol: its open requests, its answers."""

    def __init__(self, process: FakeTransport) -> None:
        self._process = process
        self._outgoing: dict[str, PendingRequest] = {}

    # -- requests of the fake CLI -----------------------------------------------------------------

    def open(self, request: Mapping[str, Any]) -> PendingRequest:
        """A new request with a fresh id, waiting for its answer (not yet sent)."""
        request_id = self._process._next_id()
        pending = PendingRequest(self._process, request_id, dict(request))
        self._outgoing[request_id] = pending
        return pending

    def adopt(self, pending: PendingRequest) -> None:
        """Wait for the answer to a request made elsewhere (a subclass of PendingRequest)."""
        self._outgoing[pending.request_id] = pending

    def withdraw(self, request_id: str) -> None:
        self._outgoing.pop(request_id, None)

    def resolve(self, frame: Mapping[str, Any]) -> None:
        """The SDK's ``control_response``: wake the request it answers (unknown ids are ignored)."""
        response = frame.get("response") or {}
        pending = self._outgoing.pop(str(response.get("request_id")), None)
        if pending is not None:
            pending._resolve(response)

    # -- requests of the SDK ----------------------------------------------------------------------

    async def answer(self, frame: Mapping[str, Any]) -> None:
        """The SDK's ``control_request``: record ``initialize``, answer unless told not to."""
        await trio.lowlevel.checkpoint()
        process = self._process
        request = frame.get("request") or {}
        subtype = request.get("subtype")
        if subtype == "initialize":
            process.initialize_request = request
        if subtype in process.cli.unanswered:
            return
        request_id = cast(str, frame.get("request_id"))  # echoed as the SDK sent it
        match subtype:
            case "initialize":
                payload = frames.initialize_response(
                    model=process.model,
                    pid=40000 + process.index,
                    permission_mode=process.options.permission_mode or "default",
                    extra=process.cli.extra_initialize_response,
                )
                answer = frames.initialize_control_response(request_id, payload)
            case "interrupt" if process.cli.ignores_interrupts:
                payload = frames.interrupt_response(process._runner.queued_uuids(), [])
                answer = frames.control_response(request_id, payload)
            case "interrupt":
                if request.get("cancel_queued") is True and process.cli.cancel_queued:
                    cancelled = process._runner.cancel_queued()
                    process._runner.interrupt()
                    payload = frames.interrupt_response([], cancelled)
                else:
                    still_queued = process._runner.queued_uuids()
                    process._runner.interrupt()
                    payload = frames.interrupt_response(still_queued)
                answer = frames.control_response(request_id, payload)
            case "mcp_status":
                answer = frames.control_response(request_id, frames.mcp_status_response())
            case "set_model":
                # The next turn's init (and the frames after it) carry the new model.
                model = request.get("model")
                process.model = model if isinstance(model, str) and model else process.model
                answer = frames.control_response(request_id, {})
            case "get_context_usage":
                payload = frames.context_usage_response(model=process.model)
                answer = frames.control_response(request_id, payload)
            case _:
                answer = frames.control_response(request_id, {})
        await process._emit(answer)
