"""The user-input broker: AskUserQuestion and MCP elicitation, answered by the user.

Requests come from two places, both outside our nurseries:

* ``can_use_tool("AskUserQuestion", ...)``, which the SDK calls from its own detached task, and
* the transport tap (:mod:`.tap`), which lifts the CLI's ``elicitation`` control requests out of
  the SDK's reader task.

Each request is handed over a bounded channel to :func:`run_user_input_broker`, which runs in the
session's nursery. It emits ``user_input_request``, then waits - inside a per-request cancel scope
with the deadline - for the answer from the ``on_user_input`` handler or from
``Session.answer()``. Every request ends in exactly one ``user_input_resolved`` event and exactly
one reply to the CLI:

==============  ======================================  ===================================
outcome         AskUserQuestion reply                    elicitation reply
==============  ======================================  ===================================
answered        allow, ``updated_input["answers"]``      ``{"action": "accept"|..., ...}``
expired         allow with no answers ("did not answer")  ``{"action": "cancel"}``
cancelled       deny with ``interrupt`` (session ends)    ``{"action": "cancel"}``
failed          error reply (the handler raised)          error reply
withdrawn       none: the CLI cancelled the request       none
==============  ======================================  ===================================

Never a made-up ``decline``: only the user declines.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import attrs
import trio
from claude_agent_sdk import (
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)

from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.events import (
    Error,
    Event,
    Question,
    UserInputRequest,
    UserInputResolved,
)

UserInputHandler = Callable[[UserInputRequest], Awaitable[Any]]
Outcome = Literal["answered", "expired", "cancelled", "withdrawn", "failed"]

ASK_USER_TOOL = "AskUserQuestion"
# Requests waiting to be picked up by the broker task. They are rare and each holds an SDK task;
# a full inbox means the broker is stuck, and then backpressure on the SDK is right.
_INBOX_SIZE = 16


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
    done: bool = False


def _questions_from_input(tool_input: Mapping[str, Any]) -> tuple[Question, ...]:
    questions = tool_input.get("questions")
    if not isinstance(questions, list):
        return ()
    out = []
    for q in questions:
        if not isinstance(q, Mapping):
            continue
        labels = tuple(
            str(o.get("label", "")) if isinstance(o, Mapping) else str(o)
            for o in q.get("options") or ()
        )
        out.append(
            Question(
                question=str(q.get("question", "")),
                header=q.get("header") if isinstance(q.get("header"), str) else None,
                options=labels,
                multi_select=bool(q.get("multiSelect", False)),
            )
        )
    return tuple(out)


def ask_user_answers(answer: Any, questions: tuple[Question, ...]) -> dict[str, str]:
    """Normalize a user's answer to AskUserQuestion into ``{question_text: label}``.

    Accepts a mapping ``{question: label | [labels]}`` or, when there is exactly one question, a
    bare string. Anything else is the caller's mistake: a clear ``InvalidParamsError``.
    """
    if isinstance(answer, str) and len(questions) == 1:
        return {questions[0].question: answer}
    if not isinstance(answer, Mapping):
        raise InvalidParamsError(
            "answer",
            answer,
            "AskUserQuestion takes a mapping {question text: chosen label (or list of labels)}"
            " (or a plain string when there is one question)",
        )
    known = {q.question for q in questions}
    out: dict[str, str] = {}
    for key, value in answer.items():
        if known and key not in known:
            raise InvalidParamsError(
                "answer", key, f"not one of the questions asked: {sorted(known)!r}"
            )
        if isinstance(value, list | tuple):
            out[str(key)] = ", ".join(str(v) for v in value)
        else:
            out[str(key)] = str(value)
    return out


def elicitation_reply(answer: Any) -> dict[str, Any]:
    """Normalize an answer to an MCP elicitation into the CLI's ``{"action", "content"}``."""
    if isinstance(answer, Mapping) and "action" in answer:
        action = answer["action"]
        if action not in ("accept", "decline", "cancel"):
            raise InvalidParamsError("answer.action", action, "one of accept, decline, cancel")
        reply: dict[str, Any] = {"action": action}
        if action == "accept":
            content = answer.get("content", {})
            if not isinstance(content, Mapping):
                raise InvalidParamsError("answer.content", content, "a mapping of field values")
            reply["content"] = dict(content)
        return reply
    if isinstance(answer, Mapping):
        return {"action": "accept", "content": dict(answer)}
    raise InvalidParamsError(
        "answer",
        answer,
        'an elicitation takes {"action": "accept", "content": {...}} | {"action": "decline"} |'
        ' {"action": "cancel"}, or a mapping of field values (accept)',
    )


class UserInputBroker:
    """State shared by the SDK-side entry points and the broker task (one trio thread: no locks).

    Channels: owns the inbox (both ends); each request owns a one-shot reply channel, closed by
    whoever resolves it. Cancellation: :meth:`close` resolves every pending request as
    ``cancelled`` and closes the inbox, so no SDK task waits on us after the session ends.
    Error handling: a raising handler resolves its request as ``failed`` (an error reply to the
    CLI, an ``error`` event with ``fatal=False``); the session goes on.
    """

    def __init__(
        self,
        *,
        emit: Callable[[Event], Event | None],
        handler: UserInputHandler | None,
        timeout: float,
        send_control_response: Callable[..., Awaitable[None]] | None = None,
    ) -> None:
        self._emit = emit
        self._handler = handler
        self._timeout = timeout
        self._send_control_response = send_control_response
        self._ids = itertools.count(1)
        self._pending: dict[str, _Pending] = {}
        self._by_cli_id: dict[str, str] = {}
        self._finished: dict[str, Outcome] = {}
        self._inbox_send, self._inbox_recv = trio.open_memory_channel[_Pending](_INBOX_SIZE)
        self._closed = False

    # -- entry points called from the SDK's tasks ----------------------------------------------

    async def can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        await trio.lowlevel.checkpoint()
        if tool_name != ASK_USER_TOOL:
            # We only intercept questions; permission policy is the options' business.
            return PermissionResultAllow(updated_input=tool_input)
        request_id = f"ask-{next(self._ids)}"
        event = UserInputRequest(
            request_id=request_id,
            source="model-tool",
            questions=_questions_from_input(tool_input),
        )
        outcome, value = await self._submit(event, tool_input, cli_request_id=None)
        match outcome:
            case "answered":
                return PermissionResultAllow(updated_input={**tool_input, "answers": value})
            case "expired":
                return PermissionResultAllow(updated_input=tool_input)
            case "failed":
                raise RuntimeError(f"the user-input handler failed: {value}")
            case "cancelled" | "withdrawn":
                return PermissionResultDeny(
                    message="The user did not answer: the session was aborted.", interrupt=True
                )

    async def on_elicitation(self, frame: dict[str, Any]) -> None:
        """Called by the tap for a CLI ``elicitation`` control request (never blocks long)."""
        request = frame.get("request") or {}
        cli_id = str(frame.get("request_id", ""))
        request_id = f"elicit-{next(self._ids)}"
        schema = request.get("requested_schema")
        event = UserInputRequest(
            request_id=request_id,
            source="mcp-elicitation",
            message=str(request.get("message", "")),
            server_name=request.get("mcp_server_name"),
            requested_schema=schema if isinstance(schema, Mapping) else None,
        )
        pending = self._make_pending(event, request, cli_request_id=cli_id)
        if pending is None:
            await self._reply_elicitation(cli_id, "cancelled", None)
            return
        try:
            await self._inbox_send.send(pending)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._pending.pop(request_id, None)
            await self._reply_elicitation(cli_id, "cancelled", None)

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
        if pending.answered.is_set():
            # Accepted once already, not yet delivered: a second answer must not replace the
            # first one silently (both callers were told "accepted").
            return AnswerRejected(
                request_id=request_id, reason=f"request {request_id!r} is already answered"
            )
        try:
            if pending.event.source == "model-tool":
                ask_user_answers(answer, pending.event.questions)
            else:
                elicitation_reply(answer)
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

    def _make_pending(
        self, event: UserInputRequest, raw_input: Mapping[str, Any], *, cli_request_id: str | None
    ) -> _Pending | None:
        if self._closed:
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
        self, event: UserInputRequest, raw_input: Mapping[str, Any], *, cli_request_id: str | None
    ) -> tuple[Outcome, Any]:
        await trio.lowlevel.checkpoint()
        pending = self._make_pending(event, raw_input, cli_request_id=cli_request_id)
        if pending is None:
            return ("cancelled", None)
        with pending.reply_recv:
            try:
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
        pending = self._pending.pop(request_id, None)
        if pending is None or pending.done:
            return
        pending.done = True
        self._finished[request_id] = outcome
        if pending.cli_request_id is not None:
            self._by_cli_id.pop(pending.cli_request_id, None)
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

    async def _reply_elicitation(self, cli_id: str, outcome: Outcome, value: Any) -> None:
        if self._send_control_response is None or outcome == "withdrawn":
            await trio.lowlevel.checkpoint()
            return
        if outcome == "answered":
            await self._send_control_response(cli_id, value)
        elif outcome == "failed":
            await self._send_control_response(cli_id, None, error=str(value))
        else:  # expired, cancelled: an explicit no-answer, never a made-up decline
            await self._send_control_response(cli_id, {"action": "cancel"})

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
        """Wait for one answer (handler or ``answer()``) until the deadline; resolve it."""
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
                if raw_answer is None:
                    outcome = "expired"
                elif event.source == "model-tool":
                    value = ask_user_answers(raw_answer, event.questions)
                    outcome = "answered"
                else:
                    value = elicitation_reply(raw_answer)
                    outcome = "answered"
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
            if event.source == "model-tool":
                value = ask_user_answers(pending.answer, event.questions)
            else:
                value = elicitation_reply(pending.answer)
        if not pending.done:
            self._resolve(request_id, outcome, value)
        if pending.cli_request_id is not None:
            # Withdrawn or cancelled meanwhile: reply with what it was resolved as.
            final = self._finished[request_id]
            with trio.move_on_after(_REPLY_GRACE):
                await self._reply_elicitation(
                    pending.cli_request_id, final, value if final == outcome else None
                )


# A reply write that takes longer than this means the CLI is gone; the session's own teardown
# reports that, so the broker just stops waiting.
_REPLY_GRACE = 5.0


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
                if pending.done:
                    if pending.cli_request_id is not None:
                        await broker._reply_elicitation(
                            pending.cli_request_id, broker._finished[pending.event.request_id], None
                        )
                    continue
                nursery.start_soon(broker._serve, pending)
