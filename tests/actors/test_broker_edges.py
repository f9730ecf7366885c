"""The user-input broker alone, at the edges of its scheduling: a request resolved before its
task starts, a handler with no answer, an answer that comes after the handler's."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from claude_agent_sdk import PermissionResultDeny, ToolPermissionContext

from claude_trio import AnswerRejected, deny_tool
from claude_trio.actors.extensions.broker import (
    UserInputBroker,
    UserInputHandler,
    run_user_input_broker,
)
from claude_trio.protocol.extensions.approvals import CANCELLED_MESSAGE
from claude_trio.protocol.session.events import Event, UserInputRequest, UserInputResolved

CONTEXT = ToolPermissionContext(signal=None, suggestions=[])


def make_broker(events: list[Event], handler: UserInputHandler | None) -> UserInputBroker:
    def emit(event: Event) -> Event:
        events.append(event)
        return event

    return UserInputBroker(emit=emit, send_reply=lambda reply: None, handler=handler, timeout=300)


async def test_a_request_resolved_before_its_task_starts_is_not_served(
    autojump_clock: trio.testing.MockClock,
) -> None:
    events: list[Event] = []
    broker = make_broker(events, handler=None)
    results: list[Any] = []

    async def ask() -> None:
        results.append(await broker.can_use_tool("Bash", {"command": "ls"}, CONTEXT))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        # What the broker task does, with the session's close() landing between taking the
        # request from the inbox and the request's own task taking its first step.
        pending = broker._inbox_recv.receive_nowait()
        nursery.start_soon(broker._serve, pending)
        broker.close("cancelled")
    assert trio.current_time() == 0.0  # nothing waited for a deadline
    assert [(type(e), getattr(e, "outcome", None)) for e in events] == [
        (UserInputResolved, "cancelled")
    ]  # and no request shown after its resolution
    assert results == [PermissionResultDeny(message=CANCELLED_MESSAGE, interrupt=True)]


async def test_a_handler_with_no_answer_denies_at_once_without_claiming_a_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    events: list[Event] = []

    async def no_answer(request: UserInputRequest) -> Any:
        await trio.lowlevel.checkpoint()
        return None

    broker = make_broker(events, handler=no_answer)
    async with trio.open_nursery() as nursery:
        await nursery.start(run_user_input_broker, broker)
        result = await broker.can_use_tool("Bash", {"command": "ls"}, CONTEXT)
        broker.close()
    assert trio.current_time() == 0.0
    assert result == PermissionResultDeny(
        message="No one answered the permission request for Bash, so the tool call was denied."
    )
    assert [e.outcome for e in events if isinstance(e, UserInputResolved)] == ["expired"]


async def test_an_answer_after_the_handler_answered_is_refused_and_the_handler_wins(
    autojump_clock: trio.testing.MockClock,
) -> None:
    events: list[Event] = []
    late: list[Any] = []

    async with trio.open_nursery() as nursery:

        async def answer_late(request_id: str) -> None:
            # Runs in the scheduling round right after the handler returned, while the
            # request is decided but not resolved yet.
            late.append(broker.answer(request_id, "allow"))

        async def handler(request: UserInputRequest) -> Any:
            await trio.lowlevel.checkpoint()
            nursery.start_soon(answer_late, request.request_id)
            return deny_tool("the handler says no")

        broker = make_broker(events, handler=handler)
        await nursery.start(run_user_input_broker, broker)
        result = await broker.can_use_tool("Bash", {"command": "ls"}, CONTEXT)
        broker.close()
    assert result == PermissionResultDeny(message="the handler says no", interrupt=False)
    [rejected] = late
    assert isinstance(rejected, AnswerRejected)
    assert "already answered" in rejected.reason
    [resolved] = [e for e in events if isinstance(e, UserInputResolved)]
    assert (resolved.outcome, resolved.answer) == (
        "answered",
        {"decision": "deny", "message": "the handler says no"},
    )
