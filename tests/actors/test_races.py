"""Named races, each forced in both orders with ``trio.testing.Sequencer``.

Each test pins the exact outcome of each order: what the caller is told (``Accepted`` /
``Rejected``, ``AnswerAccepted`` / ``AnswerRejected``), which terminal event ends the execution,
what the fake CLI received, and, for deadlines, the exact virtual time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing
from machine_kit import ASK_INPUT, QUESTION
from session_kit import CONFIG, assert_no_leak, check_stream, collect, fake_session, kinds

from claude_trio import (
    Aborted,
    Accepted,
    AnswerAccepted,
    AnswerRejected,
    Event,
    ExecuteParams,
    Rejected,
    Result,
    Session,
    UserInputRequest,
    UserInputResolved,
)
from claude_trio.events import WarningEvent
from claude_trio.testing import FakeCLI, FakeTurn


class Watch:
    """Lets a task wait until the consumer has seen an event of some kind."""

    def __init__(self) -> None:
        self.seen: list[Event] = []
        self._changed = trio.Event()

    def on_event(self, event: Event) -> None:
        self.seen.append(event)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, kind: str) -> Event:
        while True:
            for event in self.seen:
                if event.kind == kind:
                    return event
            await self._changed.wait()


async def run_with(
    session: Session, watch: Watch, *tasks: Callable[[], Awaitable[None]]
) -> list[Event]:
    """Consume the session's events while ``tasks`` act on it; every task finishes."""
    async with trio.open_nursery() as nursery:
        for task in tasks:
            nursery.start_soon(task)
        events = await collect(session, watch.on_event)
    check_stream(events)
    return events


def results(events: list[Event]) -> list[tuple[int, bool]]:
    return [(e.turn, e.final) for e in events if isinstance(e, Result)]


# -- push vs result at the turn boundary --------------------------------------------------------


@pytest.mark.parametrize("order", ["push-first", "result-first"])
async def test_push_vs_result_at_the_turn_boundary(
    autojump_clock: trio.testing.MockClock, order: str
) -> None:
    seq = trio.testing.Sequencer()
    cli_pos, push_pos = (1, 0) if order == "push-first" else (0, 1)

    async def first(cli: FakeTurn) -> None:
        await cli.text("thinking it over", chunk=4, delay=0.5)
        async with seq(cli_pos):
            await cli.result()

    async def second(cli: FakeTurn) -> None:
        await cli.text("about your push")

    fake = FakeCLI([first, second])
    watch = Watch()
    outcomes: list[Accepted | Rejected] = []
    async with fake_session(fake) as session:

        async def user() -> None:
            async with seq(push_pos):
                if order == "result-first":
                    # "result" means our side has processed it: the execution ended with it.
                    await session.wait_ended()
                outcomes.append(await session.push("one more thing"))

        events = await run_with(session, watch, user)
    (outcome,) = outcomes
    if order == "push-first":
        assert isinstance(outcome, Accepted)
        assert results(events) == [(1, False), (2, True)]
        assert events[-1].user_message_uuids == (outcome.uuid,)  # type: ignore[union-attr]
        assert [m["message"]["content"] for m in fake.transport.user_messages] == [
            "hello",
            "one more thing",
        ]
    else:
        assert outcome == Rejected(reason="the execution has ended")
        assert results(events) == [(1, True)]
        assert [m["message"]["content"] for m in fake.transport.user_messages] == ["hello"]
        assert "user_message" not in kinds(events)
    assert_no_leak(fake)


# -- push vs abort ------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["push-first", "abort-first"])
async def test_push_vs_abort(autojump_clock: trio.testing.MockClock, order: str) -> None:
    seq = trio.testing.Sequencer()
    push_pos, abort_pos = (0, 1) if order == "push-first" else (1, 0)

    async def script(cli: FakeTurn) -> None:
        await cli.text("a very long answer", chunk=1, delay=1.0)

    fake = FakeCLI(script)
    watch = Watch()
    outcomes: list[Accepted | Rejected] = []
    async with fake_session(fake) as session:

        async def pusher() -> None:
            await watch.wait_for("text_delta")
            async with seq(push_pos):
                outcomes.append(await session.push("one more thing"))

        async def aborter() -> None:
            await watch.wait_for("text_delta")
            async with seq(abort_pos):
                await session.abort()

        events = await run_with(session, watch, pusher, aborter)
    (outcome,) = outcomes
    last = events[-1]
    assert isinstance(last, Aborted)
    assert last.reason == "aborted_streaming"  # the CLI's own confirmation
    assert len([e for e in events if isinstance(e, Aborted)]) == 1
    assert fake.transport.interrupts == 1
    lost = [e for e in events if isinstance(e, WarningEvent) and e.code == "push_undelivered"]
    if order == "push-first":
        # Accepted, written to the CLI, but the turn it waited for was aborted: reported.
        assert isinstance(outcome, Accepted)
        assert [w.message for w in lost] == [
            f"push {outcome.uuid} was accepted but never reached the model: "
            "the execution was aborted"
        ]
        assert "result" not in kinds(events)
    else:
        assert outcome == Rejected(reason="the execution was aborted")
        assert lost == []
        assert "user_message" not in kinds(events)
        assert [m["message"]["content"] for m in fake.transport.user_messages] == ["hello"]
    assert_no_leak(fake)


# -- answer vs abort ----------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["answer-first", "abort-first"])
async def test_answer_vs_abort(autojump_clock: trio.testing.MockClock, order: str) -> None:
    seq = trio.testing.Sequencer()
    answer_pos, abort_pos = (0, 1) if order == "answer-first" else (1, 0)
    replies: list[dict[str, Any]] = []

    async def script(cli: FakeTurn) -> None:
        replies.append(await cli.ask_permission("AskUserQuestion", ASK_INPUT))
        await cli.text("thanks", chunk=1, delay=5.0)

    fake = FakeCLI(script)
    watch = Watch()
    answers: list[AnswerAccepted | AnswerRejected] = []
    async with fake_session(fake, on_user_input="manual") as session:

        async def answerer() -> None:
            request = await watch.wait_for("user_input_request")
            assert isinstance(request, UserInputRequest)
            async with seq(answer_pos):
                answers.append(await session.answer(request.request_id, "A"))
                if order == "answer-first":
                    await watch.wait_for("user_input_resolved")  # delivered before the abort

        async def aborter() -> None:
            await watch.wait_for("user_input_request")
            async with seq(abort_pos):
                await session.abort()

        events = await run_with(session, watch, answerer, aborter)
    (answer,) = answers
    (resolved,) = [e for e in events if isinstance(e, UserInputResolved)]
    assert isinstance(events[-1], Aborted)
    assert fake.transport.interrupts == 1
    if order == "answer-first":
        assert answer == AnswerAccepted(request_id="ask-1")
        assert resolved.outcome == "answered"
        assert resolved.answer == {QUESTION: "A"}
        (reply,) = replies
        assert reply["behavior"] == "allow"
        assert reply["updatedInput"]["answers"] == {QUESTION: "A"}
        assert events[-1].reason == "aborted_streaming"  # type: ignore[union-attr]
    else:
        assert answer == AnswerRejected(
            request_id="ask-1", reason="request 'ask-1' is already cancelled"
        )
        assert resolved.outcome == "cancelled"
        # the CLI was told no (never a made-up answer), and its turn was interrupted
        assert replies == [] or replies[0]["behavior"] == "deny"
    assert_no_leak(fake)


# -- answer vs deadline -------------------------------------------------------------------------

TIMEOUT = 10.0


@pytest.mark.parametrize("offset", [-1.0, 0.0, 1.0], ids=["before", "at", "after"])
async def test_answer_vs_deadline(autojump_clock: trio.testing.MockClock, offset: float) -> None:
    replies: list[dict[str, Any]] = []

    async def script(cli: FakeTurn) -> None:
        await cli.sleep(3.0)
        replies.append(await cli.ask_permission("AskUserQuestion", ASK_INPUT))

    fake = FakeCLI(script)
    watch = Watch()
    answers: list[tuple[float, AnswerAccepted | AnswerRejected]] = []
    resolved_at: list[float] = []
    start = trio.current_time()
    params = ExecuteParams(prompt="hello", user_input_timeout=TIMEOUT)
    async with fake_session(fake, params=params, on_user_input="manual") as session:

        async def answerer() -> None:
            request = await watch.wait_for("user_input_request")
            assert isinstance(request, UserInputRequest)
            assert request.deadline == start + 3.0 + TIMEOUT
            await trio.sleep_until(request.deadline + offset)
            answers.append((trio.current_time(), await session.answer(request.request_id, "A")))

        async def clock() -> None:
            await watch.wait_for("user_input_resolved")
            resolved_at.append(trio.current_time())

        events = await run_with(session, watch, answerer, clock)
    deadline = start + 3.0 + TIMEOUT
    ((answered_at, answer),) = answers
    (resolved,) = [e for e in events if isinstance(e, UserInputResolved)]
    (reply,) = replies
    assert reply["behavior"] == "allow"
    if offset < 0:
        assert answer == AnswerAccepted(request_id="ask-1")
        assert resolved.outcome == "answered"
        assert resolved_at == [answered_at] == [deadline - 1.0]
        assert reply["updatedInput"]["answers"] == {QUESTION: "A"}
    else:
        # At the deadline the request has expired, whichever task trio runs first.
        assert answer == AnswerRejected(
            request_id="ask-1", reason="request 'ask-1' is already expired"
        )
        assert resolved.outcome == "expired"
        assert resolved_at == [deadline]
        assert "answers" not in reply["updatedInput"]
    assert isinstance(events[-1], Result)
    assert events[-1].final
    assert_no_leak(fake)


# -- abort vs the background task's follow-up turn -----------------------------------------------


@pytest.mark.parametrize("order", ["abort-first", "follow-up-first"])
async def test_abort_vs_background_follow_up(
    autojump_clock: trio.testing.MockClock, order: str
) -> None:
    seq = trio.testing.Sequencer()
    abort_pos, job_pos = (0, 1) if order == "abort-first" else (1, 0)

    async def follow_up(turn: FakeTurn) -> None:
        await turn.text("the agent found it")

    async def script(cli: FakeTurn) -> None:
        tool = await cli.tool_use("Agent", {"prompt": "dig", "run_in_background": True})
        await cli.task_started("task-1", tool_use_id=tool, description="dig")
        await cli.tool_result(tool, "started in the background")

        async def job() -> None:
            await cli.sleep(5.0)
            try:
                async with seq(job_pos):
                    await cli.task_notification("task-1", status="completed", summary="found")
                    cli.wake(follow_up)
            except RuntimeError:  # "sequence broken": the session ended (and closed us) first
                return

        cli.background(job)

    fake = FakeCLI(script)
    watch = Watch()
    abort_times: list[float] = []
    start = trio.current_time()
    async with fake_session(fake) as session:

        async def aborter() -> None:
            await watch.wait_for("result")  # turn 1 ended; the execution waits for the task
            async with seq(abort_pos):
                if order == "follow-up-first":
                    await session.wait_ended()
                before = trio.current_time()
                await session.abort()
                abort_times.append(trio.current_time() - before)

        events = await run_with(session, watch, aborter)
    assert abort_times == [0.0]
    if order == "abort-first":
        # No turn is open, but the background agent works on: the interrupt sweeps it.
        assert fake.transport.interrupts == 1
        assert results(events) == [(1, False)]
        last = events[-1]
        assert isinstance(last, Aborted)
        assert (last.turn, last.reason) == (2, "aborted")
        assert "subagent_completed" not in kinds(events)
        assert trio.current_time() - start < 5.0  # nobody waited for the task
    else:
        assert fake.transport.interrupts == 0  # the execution had ended: nothing to stop
        assert results(events) == [(1, False), (2, True)]
        assert not [e for e in events if isinstance(e, Aborted)]
        assert kinds(events).index("subagent_completed") < kinds(events).index("turn_started", 5)
        assert trio.current_time() - start == 5.0
    assert_no_leak(fake)


def test_config_deadlines_are_distinct() -> None:
    # The exact-time asserts above rely on the kit's deadlines differing from the scripts'.
    assert TIMEOUT not in (CONFIG.control_timeout, CONFIG.abort_grace, CONFIG.close_grace)
