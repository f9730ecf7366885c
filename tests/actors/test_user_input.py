"""The user-input broker over the fake CLI: AskUserQuestion and MCP elicitation."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from session_kit import CONFIG, assert_no_leak, check_stream, collect, fake_session

from claude_trio import (
    AnswerAccepted,
    AnswerRejected,
    Error,
    ExecuteParams,
    UserInputRequest,
    UserInputResolved,
)
from claude_trio.testing import FakeCLI, FakeTurn, SDKControlError

QUESTION = {
    "question": "Which color?",
    "header": "Color",
    "options": [{"label": "red", "description": "warm"}, {"label": "blue", "description": ""}],
    "multiSelect": False,
}
ASK_INPUT = {"questions": [QUESTION]}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def asker(replies: list[dict[str, Any]]) -> Any:
    async def script(cli: FakeTurn) -> None:
        replies.append(await cli.ask_permission("AskUserQuestion", ASK_INPUT))
        await cli.text("thanks")

    return script


def eliciter(replies: list[dict[str, Any]]) -> Any:
    async def script(cli: FakeTurn) -> None:
        replies.append(await cli.elicit("elicit", "Your name?", SCHEMA))
        await cli.text("thanks")

    return script


def resolved(events: list[Any]) -> list[UserInputResolved]:
    return [e for e in events if isinstance(e, UserInputResolved)]


async def test_ask_user_question_answered_by_a_handler_reaches_the_cli(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(asker(replies))
    seen: list[UserInputRequest] = []

    async def handler(request: UserInputRequest) -> Any:
        seen.append(request)
        await trio.sleep(1.5)  # the user thinks
        return {"Which color?": "blue"}

    async with fake_session(fake, on_user_input=handler) as session:
        events = await collect(session)
    check_stream(events)
    (request,) = seen
    assert request.source == "model-tool"
    assert request.questions[0].question == "Which color?"
    assert request.questions[0].options == ("red", "blue")
    assert request.deadline is not None
    (reply,) = replies
    assert reply["behavior"] == "allow"
    assert reply["updatedInput"]["answers"] == {"Which color?": "blue"}
    assert reply["updatedInput"]["questions"] == [QUESTION]
    (done,) = resolved(events)
    assert done.outcome == "answered"
    assert done.answer == {"Which color?": "blue"}
    kinds = [e.kind for e in events]
    assert kinds.index("user_input_request") < kinds.index("user_input_resolved")
    assert_no_leak(fake)


async def test_manual_answers_through_session_answer_and_rejects_unknown_ids(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(asker(replies))
    receipts: list[Any] = []
    async with fake_session(fake, on_user_input="manual") as session:

        async def on_event(event: object) -> None:
            if isinstance(event, UserInputRequest):
                receipts.append(await session.answer("nope", {"Which color?": "red"}))
                receipts.append(await session.answer(event.request_id, {"Wrong?": "red"}))
                receipts.append(await session.answer(event.request_id, "red"))
            if isinstance(event, UserInputResolved):
                receipts.append(await session.answer(event.request_id, "blue"))

        events = await collect(session, on_event)
    unknown, wrong_question, ok, late = receipts
    assert isinstance(unknown, AnswerRejected)
    assert "no user-input request 'nope'" in unknown.reason
    assert isinstance(wrong_question, AnswerRejected)
    assert "Wrong?" in wrong_question.reason
    assert isinstance(ok, AnswerAccepted)
    assert isinstance(late, AnswerRejected)
    assert "already answered" in late.reason
    assert replies[0]["updatedInput"]["answers"] == {"Which color?": "red"}
    check_stream(events)


async def test_an_unanswered_question_expires_at_its_deadline_with_no_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(asker(replies))
    params = ExecuteParams(prompt="hi", user_input_timeout=42.0)
    asked_at: list[float] = []
    async with fake_session(fake, params=params, on_user_input="manual") as session:

        async def on_event(event: object) -> None:
            if isinstance(event, UserInputRequest):
                asked_at.append(trio.current_time())
                assert event.deadline == pytest.approx(asked_at[0] + 42.0)
            if isinstance(event, UserInputResolved):
                assert trio.current_time() - asked_at[0] == pytest.approx(42.0)

        events = await collect(session, on_event)
    (done,) = resolved(events)
    assert done.outcome == "expired"
    # an Allow with the questions and no answers: the model reads "did not answer"
    assert replies[0] == {"behavior": "allow", "updatedInput": ASK_INPUT}
    check_stream(events)


async def test_a_raising_handler_gives_an_error_reply_and_the_session_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    failures: list[BaseException] = []

    async def script(cli: FakeTurn) -> None:
        try:
            await cli.ask_permission("AskUserQuestion", ASK_INPUT)
        except SDKControlError as exc:
            failures.append(exc)
        await cli.text("went on")

    fake = FakeCLI(script)

    async def handler(request: UserInputRequest) -> Any:
        raise ValueError("the UI crashed")

    async with fake_session(fake, on_user_input=handler) as session:
        events = await collect(session)
    check_stream(events)
    (failure,) = failures
    assert "the UI crashed" in str(failure)
    (done,) = resolved(events)
    assert done.outcome == "failed"
    assert done.detail is not None
    assert "the UI crashed" in done.detail
    errors = [e for e in events if isinstance(e, Error)]
    assert len(errors) == 1
    assert errors[0].code == "callback"
    assert not errors[0].fatal
    assert events[-1].kind == "result"


async def test_without_a_handler_questions_are_not_intercepted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    failures: list[BaseException] = []

    async def script(cli: FakeTurn) -> None:
        try:
            await cli.ask_permission("AskUserQuestion", ASK_INPUT)
        except SDKControlError as exc:
            failures.append(exc)

    fake = FakeCLI(script)
    async with fake_session(fake) as session:
        events = await collect(session)
    assert fake.transport.options.can_use_tool is None
    assert len(failures) == 1  # the SDK itself refuses: no callback, "do not intercept"
    assert not resolved(events)


async def test_the_cli_withdrawing_a_question_is_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def script(cli: FakeTurn) -> None:
        pending = await cli.send_permission_request("AskUserQuestion", ASK_INPUT)
        await cli.sleep(3)
        await pending.cancel()
        await cli.text("never mind")

    fake = FakeCLI(script)
    async with fake_session(fake, on_user_input="manual") as session:
        events = await collect(session)
    check_stream(events)
    (done,) = resolved(events)
    assert done.outcome == "withdrawn"


async def test_abort_while_a_question_is_pending_cancels_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(asker(replies))
    async with fake_session(fake, on_user_input="manual") as session:

        async def on_event(event: object) -> None:
            if isinstance(event, UserInputRequest):
                await session.abort()

        events = await collect(session, on_event)
        assert isinstance(await session.answer("ask-1", "red"), AnswerRejected)
    check_stream(events)
    (done,) = resolved(events)
    assert done.outcome == "cancelled"
    assert events[-1].kind == "aborted"
    assert_no_leak(fake)


async def test_elicitation_is_answered_by_the_tap_not_rejected_by_the_sdk(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(eliciter(replies))
    seen: list[UserInputRequest] = []

    async def handler(request: UserInputRequest) -> Any:
        seen.append(request)
        return {"name": "Ada"}

    async with fake_session(fake, on_user_input=handler) as session:
        events = await collect(session)
    check_stream(events)
    (request,) = seen
    assert request.source == "mcp-elicitation"
    assert request.server_name == "elicit"
    assert request.message == "Your name?"
    assert request.requested_schema == SCHEMA
    assert replies == [{"action": "accept", "content": {"name": "Ada"}}]
    (done,) = resolved(events)
    assert done.outcome == "answered"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"action": "decline"}, {"action": "decline"}),
        ({"action": "cancel"}, {"action": "cancel"}),
        (None, {"action": "cancel"}),  # no answer: cancel, never a made-up decline
    ],
)
async def test_elicitation_decline_cancel_and_no_answer(
    autojump_clock: trio.testing.MockClock, answer: Any, expected: dict[str, Any]
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(eliciter(replies))

    async def handler(request: UserInputRequest) -> Any:
        return answer

    async with fake_session(fake, on_user_input=handler) as session:
        await collect(session)
    assert replies == [expected]


async def test_an_expired_elicitation_is_cancelled_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(eliciter(replies))
    params = ExecuteParams(prompt="hi", user_input_timeout=9.0)
    start = trio.current_time()
    async with fake_session(fake, params=params, on_user_input="manual") as session:
        events = await collect(session)
    assert replies == [{"action": "cancel"}]
    (done,) = resolved(events)
    assert done.outcome == "expired"
    assert trio.current_time() - start == pytest.approx(9.0)
    assert CONFIG.connect_timeout != 9.0  # the deadline measured is the question's own


async def test_an_answer_given_while_a_handler_waits_wins_and_is_not_ignored(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(asker(replies))

    async def slow_handler(request: UserInputRequest) -> Any:
        await trio.sleep_forever()

    receipts: list[Any] = []
    async with fake_session(fake, on_user_input=slow_handler) as session:

        async def on_event(event: object) -> None:
            if isinstance(event, UserInputRequest):
                receipts.append(await session.answer(event.request_id, "red"))

        events = await collect(session, on_event)
    assert [type(r) for r in receipts] == [AnswerAccepted]
    assert replies[0]["updatedInput"]["answers"] == {"Which color?": "red"}
    (done,) = resolved(events)
    assert done.outcome == "answered"
    check_stream(events)
