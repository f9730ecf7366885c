"""The user-input broker: AskUserQuestion, tool approvals and MCP elicitation, answered by the user.

Requests come from two places, both outside our nurseries:

* ``can_use_tool(...)``, which the SDK calls from its own detached task: for AskUserQuestion, and
  for every other tool call the CLI asks about under an asking permission mode (a tool approval,
  ``protocol/extensions/approvals.py``), and
* the transport tap (:mod:`.tap`), which lifts the CLI's ``elicitation`` control requests out of
  the SDK's reader task.

Each request is handed over a bounded channel to :func:`run_user_input_broker`, which runs in the
session's nursery. It emits ``user_input_request``, then waits - inside a per-request cancel scope
with the deadline - for the answer from the ``on_user_input`` handler or from
``Session.answer()``. Every request ends in exactly one ``user_input_resolved`` event and exactly
one reply to the CLI; which reply each outcome gets is decided in
:mod:`claude_trio.protocol.extensions.user_input`. Elicitation replies go to the CLI through the
session's input channel (the one writer of the CLI's stdin); AskUserQuestion is answered by
returning from
``can_use_tool``, which the SDK turns into its reply.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio
from claude_agent_sdk import PermissionResult, PermissionResultAllow, ToolPermissionContext

from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.approvals import (
    NO_ANSWER_FROM_HANDLER,
    approval_reply,
    approval_request,
    remembered_tool,
)
from claude_trio.protocol.extensions.user_input import (
    ASK_USER_TOOL,
    ControlReply,
    Outcome,
    ask_user_reply,
    elicitation_control_reply,
    elicitation_request,
    normalize_answer,
    questions_from_input,
)
from claude_trio.protocol.session.events import Error, Event, UserInputRequest, UserInputResolved

UserInputHandler = Callable[[UserInputRequest], Awaitable[Any]]

# Requests waiting to be picked up by the broker task. They are rare and each holds an SDK task;
# a full inbox means the broker is stuck, and then backpressure on the SDK is right.
_INBOX_SIZE = 16
MAX_PENDING_REQUESTS = 64
"""Requests open at once; the CLI asks one question at a time, so more is a runaway (the extra
ones are answered ``cancelled`` at once). Also bounds the replies the input channel may hold."""


@attrs.frozen(kw_only=True)
class AnswerAccepted:
    request_id: str


@attrs.frozen(kw_only=True)
class AnswerRejected:
    request_id: str
    reason: str


@attrs.define(eq=False)
class _Pending:
    """One request in flight. ``reply`` is the one-shot channel back to whoever waits for it."""

    event: UserInputRequest
    raw_input: Mapping[str, Any]
    cli_request_id: str | None
    reply: trio.MemorySendChannel[tuple[Outcome, Any]]
    reply_recv: trio.MemoryReceiveChannel[tuple[Outcome, Any]]
    scope: trio.CancelScope | None = None
    answer: Any = None
    answered: trio.Event = attrs.field(factory=trio.Event)
    #: The handler has returned or raised: the request is decided, ``answer()`` comes late.
    decided: bool = False
    done: bool = False


class UserInputBroker:
    """State shared by the SDK-side entry points and the broker task (one trio thread: no locks).

    Channels: owns the inbox (both ends); each request owns a one-shot reply channel, closed by
    whoever resolves it; elicitation replies go to ``send_reply`` (the session's input channel,
    which never refuses one: it has room for ``MAX_PENDING_REQUESTS`` of them).
    Cancellation: :meth:`close` resolves every pending request as ``cancelled`` and closes the
    inbox, so no SDK task waits on us after the session ends.
    Error handling: a raising handler resolves its request as ``failed`` (an error reply to the
    CLI, an ``error`` event with ``fatal=False``); the session goes on.
    """

    def __init__(
        self,
        *,
        emit: Callable[[Event], Event | None],
        send_reply: Callable[[ControlReply], None],
        handler: UserInputHandler | None,
        timeout: float,
    ) -> None:
        self._emit = emit
        self._send_reply = send_reply
        self._handler = handler
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._pending: dict[str, _Pending] = {}
        self._by_cli_id: dict[str, str] = {}
        self._finished: dict[str, Outcome] = {}
        self._inbox_send, self._inbox_recv = trio.open_memory_channel[_Pending](_INBOX_SIZE)
        self._closed = False
        # Tools an "always" answer allowed for the rest of the session without a rule the CLI
        # could keep (approvals.remembered_tool): asked about again, they are allowed at once.
        self._always_allowed: set[str] = set()
        # Set by serve_in(): where the broker's task starts, once, when the first request comes.
        self._serve_nursery: trio.Nursery | None = None

    def serve_in(self, nursery: trio.Nursery) -> None:
        """Have :func:`run_user_input_broker` run in ``nursery`` from the first request on.

        Most sessions are never asked anything: a task waiting for the whole session (and
        the nursery it needs) would be a cost every one of them pays. Requests wait in the
        inbox meanwhile, as they would for a running broker busy elsewhere.
        """
        self._serve_nursery = nursery

    # -- entry points called from the SDK's tasks ----------------------------------------------

    async def can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        await trio.lowlevel.checkpoint()
        if tool_name != ASK_USER_TOOL:
            return await self._approve(tool_name, tool_input, context)
        request_id = f"ask-{next(self._ids)}"
        event = UserInputRequest(
            request_id=request_id,
            source="model-tool",
            questions=questions_from_input(tool_input),
        )
        outcome, value = await self._submit(event, tool_input)
        if outcome == "failed":
            raise RuntimeError(f"the user-input handler failed: {value}")
        return ask_user_reply(outcome, value, tool_input)

    async def _approve(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        """A tool call the CLI asks about (an asking permission mode): the same way as a
        question, replied to as ``approvals.approval_reply`` says. A tool an earlier
        ``always`` answer remembered is allowed at once, without a request."""
        if tool_name in self._always_allowed:
            await trio.lowlevel.checkpoint()
            return PermissionResultAllow(updated_input=tool_input)
        event = approval_request(
            f"approve-{next(self._ids)}",
            tool_name,
            tool_input,
            suggestions=context.suggestions,
            tool_use_id=context.tool_use_id,
            agent_id=context.agent_id,
            blocked_path=context.blocked_path,
            decision_reason=context.decision_reason,
            title=context.title,
            display_name=context.display_name,
            description=context.description,
        )
        outcome, value = await self._submit(event, tool_input)
        if outcome == "failed":
            raise RuntimeError(f"the user-input handler failed: {value}")
        remembered = remembered_tool(outcome, value, event)
        if remembered is not None:
            self._always_allowed.add(remembered)
        return approval_reply(outcome, value, event, timeout=self._timeout)

    async def on_elicitation(self, frame: dict[str, Any]) -> None:
        """Called by the tap for a CLI ``elicitation`` control request (never blocks long)."""
        await trio.lowlevel.checkpoint()
        request = frame.get("request") or {}
        cli_id = str(frame.get("request_id", ""))
        event = elicitation_request(f"elicit-{next(self._ids)}", request)
        pending = self._make_pending(event, request, cli_request_id=cli_id)
        if pending is None:
            self._reply(elicitation_control_reply(cli_id, "cancelled", None))
            return
        try:
            self._serve_first()
            await self._inbox_send.send(pending)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._resolve(event.request_id, "cancelled", None)

    def on_cancel(self, cli_request_id: str) -> bool:
        """The CLI withdrew a control request. True when it was one of ours (an elicitation)."""
        request_id = self._by_cli_id.get(cli_request_id)
        if request_id is None:
            return False
        self._resolve(request_id, "withdrawn", None)
        return True

    # -- the consumer's side ----------------------------------------------------------------

    def answer(self, request_id: str, answer: Any) -> AnswerAccepted | AnswerRejected:
        """Record the user's answer. Never raises for a race: unknown / finished -> rejected."""
        pending = self._pending.get(request_id)
        if pending is None or pending.done:
            finished = self._finished.get(request_id)
            reason = (
                f"request {request_id!r} is already {finished}"
                if finished
                else f"no user-input request {request_id!r} is pending"
            )
            return AnswerRejected(request_id=request_id, reason=reason)
        if pending.answered.is_set() or pending.decided:
            # Accepted once already (or the handler answered), not yet delivered: a second
            # answer must not replace the first one silently.
            return AnswerRejected(
                request_id=request_id, reason=f"request {request_id!r} is already answered"
            )
        try:
            normalize_answer(pending.event, answer)
        except InvalidParamsError as exc:
            return AnswerRejected(request_id=request_id, reason=str(exc))
        pending.answer = answer
        pending.answered.set()
        return AnswerAccepted(request_id=request_id)

    @property
    def pending_ids(self) -> tuple[str, ...]:
        return tuple(rid for rid, p in self._pending.items() if not p.done)

    def close(self, outcome: Outcome = "cancelled") -> None:
        """Resolve everything still pending (abort / end of session) and refuse new requests."""
        self._closed = True
        for request_id in list(self._pending):
            self._resolve(request_id, outcome, None)
        self._inbox_send.close()

    # -- internals -----------------------------------------------------------------------------

    def _serve_first(self) -> None:
        """Start the broker's task if ``serve_in`` asked for it and it has not started yet."""
        nursery, self._serve_nursery = self._serve_nursery, None
        if nursery is not None:
            nursery.start_soon(run_user_input_broker, self)

    def _reply(self, reply: ControlReply | None) -> None:
        if reply is not None:
            self._send_reply(reply)

    def _make_pending(
        self, event: UserInputRequest, raw_input: Mapping[str, Any], *, cli_request_id: str | None
    ) -> _Pending | None:
        if self._closed or len(self._pending) >= MAX_PENDING_REQUESTS:
            return None
        reply_send, reply_recv = trio.open_memory_channel[tuple[Outcome, Any]](1)
        pending = _Pending(
            event=event,
            raw_input=raw_input,
            cli_request_id=cli_request_id,
            reply=reply_send,
            reply_recv=reply_recv,
        )
        self._pending[event.request_id] = pending
        if cli_request_id is not None:
            self._by_cli_id[cli_request_id] = event.request_id
        return pending

    async def _submit(
        self, event: UserInputRequest, raw_input: Mapping[str, Any]
    ) -> tuple[Outcome, Any]:
        await trio.lowlevel.checkpoint()
        pending = self._make_pending(event, raw_input, cli_request_id=None)
        if pending is None:
            return ("cancelled", None)
        with pending.reply_recv:
            try:
                self._serve_first()
                await self._inbox_send.send(pending)
                return await pending.reply_recv.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
                self._resolve(event.request_id, "cancelled", None)
                return ("cancelled", None)
            except trio.Cancelled:
                # The SDK cancels this task when the CLI sends control_cancel_request.
                self._resolve(event.request_id, "withdrawn", None)
                raise

    def _resolve(self, request_id: str, outcome: Outcome, value: Any) -> None:
        """The one place a request gets its outcome: its event, and its reply to the CLI."""
        pending = self._pending.pop(request_id, None)
        if pending is None or pending.done:
            return
        pending.done = True
        self._finished[request_id] = outcome
        if pending.cli_request_id is not None:
            self._by_cli_id.pop(pending.cli_request_id, None)
            self._reply(elicitation_control_reply(pending.cli_request_id, outcome, value))
        if pending.scope is not None:
            pending.scope.cancel()
        # A waiter that is gone (withdrawn) is owed nothing.
        gone = (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock)
        with contextlib.suppress(*gone):
            pending.reply.send_nowait((outcome, value))
        pending.reply.close()
        answer = value if outcome == "answered" else None
        detail = value if outcome == "failed" else None
        self._emit(
            UserInputResolved(
                request_id=request_id, outcome=outcome, answer=answer, detail=detail
            )
        )

    async def _first_answer(self, pending: _Pending, event: UserInputRequest) -> Any:
        """The handler's answer or one given through ``answer()``, whichever comes first.

        Both are offered to every request: a UI with a handler may still answer a request from
        elsewhere (another client of the same session), and neither answer may be lost by being
        "accepted" and then ignored. A handler that raises fails the request.
        """
        handler = self._handler
        if handler is None:
            await pending.answered.wait()
            return pending.answer
        answers: list[Any] = []
        failures: list[Exception] = []
        async with trio.open_nursery() as nursery:

            async def from_handler() -> None:
                await trio.lowlevel.checkpoint()
                try:
                    answers.append(await handler(event))
                except Exception as exc:
                    failures.append(exc)
                if not pending.answered.is_set():
                    pending.decided = True  # first: a later answer() is refused
                nursery.cancel_scope.cancel()

            async def from_answer() -> None:
                await pending.answered.wait()
                answers.append(pending.answer)
                nursery.cancel_scope.cancel()

            nursery.start_soon(from_handler)
            nursery.start_soon(from_answer)
        if failures:
            raise failures[0]
        return answers[0]

    async def _serve(self, pending: _Pending) -> None:
        """Wait for one answer (handler or ``answer()``) until the deadline; resolve it.

        A request resolved between being taken from the inbox and this task starting (an
        abort, the end of the session) is done: nothing is emitted, no handler runs.
        """
        if pending.done:
            await trio.lowlevel.checkpoint()
            return
        request_id = pending.event.request_id
        deadline = trio.current_time() + self._timeout
        event = attrs.evolve(pending.event, deadline=deadline)
        stamped = self._emit(event)
        if isinstance(stamped, UserInputRequest):
            event = stamped  # the handler gets the event as the stream shows it (turn, seq)
        outcome: Outcome = "expired"
        value: Any = None
        with trio.CancelScope(deadline=deadline) as scope:
            pending.scope = scope
            await trio.lowlevel.checkpoint()  # an expired deadline fires before the handler runs
            try:
                raw_answer = await self._first_answer(pending, event)
                if raw_answer is not None:
                    value = normalize_answer(event, raw_answer)
                    outcome = "answered"
                else:
                    value = NO_ANSWER_FROM_HANDLER  # expired now, not at the deadline
            except Exception as exc:
                outcome, value = "failed", f"{type(exc).__name__}: {exc}"
                self._emit(
                    Error(
                        message=f"the user-input handler raised for {request_id}: {value}",
                        code="callback",
                        fatal=False,
                    )
                )
        if pending.answered.is_set() and not pending.done:
            # An answer that answer() accepted is never dropped. It can land in the same
            # instant the handler returned or raised, or the deadline fired, while this task
            # was still unwinding (the nursery in _first_answer); later ones see pending.done.
            outcome = "answered"
            value = normalize_answer(event, pending.answer)
        self._resolve(request_id, outcome, value)


async def run_user_input_broker(
    broker: UserInputBroker, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """The broker's task: serves each request in its own child task until the inbox closes.

    Channels: receives from the broker's inbox (closed by ``broker.close()``).
    Cancellation: cancelling it abandons waits; call ``broker.close()`` first so every request
    gets its reply and its ``user_input_resolved`` event.
    Error handling: handler errors are contained per request (see :class:`UserInputBroker`).
    """
    async with trio.open_nursery() as nursery:
        task_status.started()
        with broker._inbox_recv:
            async for pending in broker._inbox_recv:
                if not pending.done:
                    nursery.start_soon(broker._serve, pending)
