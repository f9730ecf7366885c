"""Tool approvals through the user-input broker, over the fake CLI, on the virtual clock.

The fake CLI asks ``can_use_tool`` as the real one does under ``permission_mode="default"``;
what it gets back is the SDK's reply to the CLI. Races (answer, deadline, abort) are forced in
each order and pinned to exact virtual times.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from session_kit import assert_no_leak, check_stream, collect, fake_session
from test_races import Watch, run_with

from claude_trio import (
    Aborted,
    AnswerAccepted,
    AnswerRejected,
    ExecuteParams,
    Result,
    UserInputRequest,
    UserInputResolved,
    open_session,
)
from claude_trio.actors.session.core import STOPPED
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.approvals import (
    CANCELLED_MESSAGE,
    always,
    deny,
    no_answer_message,
)
from claude_trio.testing import FakeCLI, FakeTurn

BASH = {"command": "rm -rf build", "description": "clean"}
SUGGESTION = {
    "type": "addRules",
    "rules": [{"toolName": "Bash", "ruleContent": "rm -rf build"}],
    "behavior": "allow",
    "destination": "localSettings",
}
CONTEXT = {
    "permission_suggestions": [SUGGESTION],
    "blocked_path": "/work/build",
    "decision_reason": "rm needs approval",
    "title": "Claude wants to run rm -rf build",
    "display_name": "Run shell command",
    "description": "clean",
    "agent_id": "agent-7",
}
TIMEOUT = 10.0
CANCELLED_REPLY = {"behavior": "deny", "message": CANCELLED_MESSAGE, "interrupt": True}
ASKING = ExecuteParams(prompt="hello", permission_mode="default", user_input_timeout=TIMEOUT)


def approver(replies: list[dict[str, Any]], *, delay: float = 0.0) -> Any:
    async def script(cli: FakeTurn) -> None:
        await cli.sleep(delay)
        replies.append(await cli.ask_permission("Bash", BASH, tool_use_id="toolu_rm", **CONTEXT))
        await cli.text("done", chunk=1, delay=5.0)

    return script


def resolved(events: list[Any]) -> list[UserInputResolved]:
    return [e for e in events if isinstance(e, UserInputResolved)]


async def test_the_request_carries_the_call_and_an_edited_input_is_what_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(approver(replies))
    seen: list[UserInputRequest] = []

    async def handler(request: UserInputRequest) -> Any:
        seen.append(request)
        await trio.sleep(2.0)
        return {"decision": "allow", "input": {"command": "rm -rf build/tmp"}}

    async with fake_session(fake, params=ASKING, on_user_input=handler) as session:
        events = await collect(session)
    check_stream(events)
    (request,) = seen
    assert request.source == "tool_permission"
    assert (request.request_id, request.tool_name, request.tool_input) == (
        "approve-1",
        "Bash",
        BASH,
    )
    assert request.tool_use_id == "toolu_rm"
    assert request.agent_id == "agent-7"
    assert request.suggestions == (SUGGESTION,)
    assert request.blocked_path == "/work/build"
    assert request.decision_reason == "rm needs approval"
    assert request.title == "Claude wants to run rm -rf build"
    assert (request.display_name, request.description) == ("Run shell command", "clean")
    assert request.deadline == TIMEOUT  # the virtual clock starts at 0
    (reply,) = replies
    assert reply == {"behavior": "allow", "updatedInput": {"command": "rm -rf build/tmp"}}
    (done,) = resolved(events)
    assert (done.outcome, done.answer) == (
        "answered",
        {"decision": "allow", "input": {"command": "rm -rf build/tmp"}},
    )
    assert fake.transport.options.permission_mode == "default"
    assert_no_leak(fake)


async def test_deny_with_a_message_and_an_interrupt_reaches_the_cli(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(approver(replies))

    async def handler(request: UserInputRequest) -> Any:
        await trio.lowlevel.checkpoint()
        return deny("not in this repo", interrupt=True)

    async with fake_session(fake, params=ASKING, on_user_input=handler) as session:
        events = await collect(session)
    check_stream(events)
    assert replies == [{"behavior": "deny", "message": "not in this repo", "interrupt": True}]
    assert resolved(events)[0].answer == {
        "decision": "deny", "message": "not in this repo", "interrupt": True
    }  # fmt: skip


async def test_always_sends_the_suggestions_as_session_rules(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(approver(replies))

    async def handler(request: UserInputRequest) -> Any:
        await trio.lowlevel.checkpoint()
        return always()

    async with fake_session(fake, params=ASKING, on_user_input=handler) as session:
        await collect(session)
    (reply,) = replies
    assert reply == {
        "behavior": "allow",
        "updatedInput": BASH,
        "updatedPermissions": [{**SUGGESTION, "destination": "session"}],
    }


WRITE = {"file_path": "/work/notes.txt", "content": "x"}
MODE_ONLY = {"type": "setMode", "mode": "acceptEdits", "destination": "session"}


async def test_always_on_a_write_is_remembered_and_the_next_write_is_not_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """For a Write the CLI suggests only a change of mode, which ``always`` never applies:
    the session remembers the tool, so the second Write is allowed without a request, while
    another tool is still asked."""
    replies: list[dict[str, Any]] = []

    async def script(cli: FakeTurn) -> None:
        for n in (1, 2):
            replies.append(
                await cli.ask_permission(
                    "Write",
                    {**WRITE, "content": str(n)},
                    tool_use_id=f"toolu_w{n}",
                    permission_suggestions=[MODE_ONLY],
                )
            )
        replies.append(await cli.ask_permission("Bash", BASH, tool_use_id="toolu_b"))
        await cli.text("done")

    asked: list[str | None] = []

    async def handler(request: UserInputRequest) -> Any:
        asked.append(request.tool_use_id)
        await trio.lowlevel.checkpoint()
        return always() if request.tool_name == "Write" else deny("no")

    fake = FakeCLI(script)
    async with fake_session(fake, params=ASKING, on_user_input=handler) as session:
        events = await collect(session)
    check_stream(events)
    assert asked == ["toolu_w1", "toolu_b"]  # the second Write was not asked
    first, second, bash = replies
    # No mode change reaches the CLI: the session, not the CLI, remembers the tool.
    assert first == {
        "behavior": "allow",
        "updatedInput": {**WRITE, "content": "1"},
        "updatedPermissions": [],
    }
    assert second == {"behavior": "allow", "updatedInput": {**WRITE, "content": "2"}}
    assert bash["behavior"] == "deny"
    requests = [e for e in events if isinstance(e, UserInputRequest)]
    assert [r.tool_use_id for r in requests] == ["toolu_w1", "toolu_b"]
    assert [r.outcome for r in resolved(events)] == ["answered", "answered"]
    assert_no_leak(fake)


async def test_always_with_a_rule_the_cli_keeps_is_not_remembered_by_the_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With an allow rule to send (the CLI's suggestion), the CLI keeps the answer: a second
    request for the same tool (one the rule does not cover) is asked again."""
    replies: list[dict[str, Any]] = []

    async def script(cli: FakeTurn) -> None:
        for n in (1, 2):
            replies.append(
                await cli.ask_permission(
                    "Bash", BASH, tool_use_id=f"toolu_{n}", permission_suggestions=[SUGGESTION]
                )
            )
        await cli.text("done")

    asked: list[str | None] = []

    async def handler(request: UserInputRequest) -> Any:
        asked.append(request.tool_use_id)
        await trio.lowlevel.checkpoint()
        return always()

    async with fake_session(FakeCLI(script), params=ASKING, on_user_input=handler) as session:
        await collect(session)
    assert asked == ["toolu_1", "toolu_2"]
    assert all("updatedPermissions" in reply for reply in replies)


async def test_an_asking_mode_without_anyone_to_answer_is_refused_before_anything_starts() -> None:
    fake = FakeCLI()
    with pytest.raises(InvalidParamsError, match=r"on_user_input.*permission_mode='acceptEdits'"):
        async with open_session(
            ExecuteParams(prompt="hi", permission_mode="acceptEdits"), transport_factory=fake
        ):
            pass  # never reached
    assert fake.transports == []


async def test_a_malformed_answer_is_refused_and_the_request_still_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(approver(replies))
    watch = Watch()
    receipts: list[Any] = []
    async with fake_session(fake, params=ASKING, on_user_input="manual") as session:

        async def answerer() -> None:
            request = await watch.wait_for("user_input_request")
            receipts.append(await session.answer(request.request_id, {"decision": "yes"}))
            await trio.sleep(1.0)
            assert replies == []  # nothing reached the CLI
            receipts.append(await session.answer(request.request_id, "deny"))

        events = await run_with(session, watch, answerer)
    bad, good = receipts
    assert isinstance(bad, AnswerRejected)
    assert "answer.decision" in bad.reason
    assert "'allow', 'deny' or 'always'" in bad.reason
    assert good == AnswerAccepted(request_id="approve-1")
    assert replies == [{"behavior": "deny", "message": "The user denied this tool call."}]
    assert [r.outcome for r in resolved(events)] == ["answered"]


# -- answer vs deadline -------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [-1.0, 0.0, 1.0], ids=["before", "at", "after"])
async def test_approval_answer_vs_deadline(
    autojump_clock: trio.testing.MockClock, offset: float
) -> None:
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(approver(replies, delay=3.0))
    watch = Watch()
    answers: list[tuple[float, Any]] = []
    resolved_at: list[float] = []
    start = trio.current_time()
    deadline = start + 3.0 + TIMEOUT
    async with fake_session(fake, params=ASKING, on_user_input="manual") as session:

        async def answerer() -> None:
            request = await watch.wait_for("user_input_request")
            assert isinstance(request, UserInputRequest)
            assert request.deadline == deadline
            await trio.sleep_until(deadline + offset)
            answers.append((trio.current_time(), await session.answer(request.request_id, "allow")))

        async def clock() -> None:
            await watch.wait_for("user_input_resolved")
            resolved_at.append(trio.current_time())

        events = await run_with(session, watch, answerer, clock)
    ((answered_at, answer),) = answers
    (done,) = resolved(events)
    (reply,) = replies
    if offset < 0:
        assert answer == AnswerAccepted(request_id="approve-1")
        assert done.outcome == "answered"
        assert resolved_at == [answered_at] == [deadline - 1.0]
        assert reply == {"behavior": "allow", "updatedInput": BASH}
    else:
        assert answer == AnswerRejected(
            request_id="approve-1", reason="request 'approve-1' is already expired"
        )
        assert done.outcome == "expired"
        assert resolved_at == [deadline]
        assert reply == {"behavior": "deny", "message": no_answer_message("Bash", TIMEOUT)}
        assert "No one answered the permission request for Bash within 10 s" in reply["message"]
    assert isinstance(events[-1], Result)
    assert events[-1].final
    assert_no_leak(fake)


# -- answer vs abort ----------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["answer-first", "abort-first"])
async def test_approval_answer_vs_abort(autojump_clock: trio.testing.MockClock, order: str) -> None:
    seq = trio.testing.Sequencer()
    answer_pos, abort_pos = (0, 1) if order == "answer-first" else (1, 0)
    replies: list[dict[str, Any]] = []
    fake = FakeCLI(approver(replies))
    watch = Watch()
    answers: list[Any] = []
    async with fake_session(fake, params=ASKING, on_user_input="manual") as session:

        async def answerer() -> None:
            request = await watch.wait_for("user_input_request")
            async with seq(answer_pos):
                answers.append(await session.answer(request.request_id, "allow"))
                if order == "answer-first":
                    await watch.wait_for("user_input_resolved")

        async def aborter() -> None:
            await watch.wait_for("user_input_request")
            async with seq(abort_pos):
                await session.abort()

        events = await run_with(session, watch, answerer, aborter)
    (answer,) = answers
    (done,) = resolved(events)  # resolved exactly once, whichever came first
    assert isinstance(events[-1], Aborted)
    if order == "answer-first":
        assert answer == AnswerAccepted(request_id="approve-1")
        assert done.outcome == "answered"
        assert replies == [{"behavior": "allow", "updatedInput": BASH}]
    else:
        assert answer == AnswerRejected(
            request_id="approve-1", reason="request 'approve-1' is already cancelled"
        )
        assert done.outcome == "cancelled"
        # Never a made-up allow: the CLI is told no, and to stop (unless the interrupt
        # ended the call before the reply reached it).
        assert replies in ([], [CANCELLED_REPLY])
    assert_no_leak(fake)


# -- deadline vs abort --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "abort_at", [TIMEOUT - 1.0, TIMEOUT + 1.0], ids=["abort-first", "deadline-first"]
)
async def test_approval_deadline_vs_abort(
    autojump_clock: trio.testing.MockClock, abort_at: float
) -> None:
    replies: list[dict[str, Any]] = []

    async def script(cli: FakeTurn) -> None:
        replies.append(await cli.ask_permission("Bash", BASH, tool_use_id="toolu_rm"))
        await cli.text("thinking it over", chunk=1, delay=30.0)

    fake = FakeCLI(script)
    watch = Watch()
    resolved_at: list[float] = []
    start = trio.current_time()
    async with fake_session(fake, params=ASKING, on_user_input="manual") as session:

        async def aborter() -> None:
            await watch.wait_for("user_input_request")
            await trio.sleep_until(start + abort_at)
            await session.abort()

        async def clock() -> None:
            await watch.wait_for("user_input_resolved")
            resolved_at.append(trio.current_time())

        events = await run_with(session, watch, aborter, clock)
    (done,) = resolved(events)
    (reply,) = replies
    assert isinstance(events[-1], Aborted)
    if abort_at < TIMEOUT:
        assert (done.outcome, resolved_at) == ("cancelled", [start + abort_at])
        assert reply == CANCELLED_REPLY
    else:
        assert (done.outcome, resolved_at) == ("expired", [start + TIMEOUT])
        assert reply == {"behavior": "deny", "message": no_answer_message("Bash", TIMEOUT)}
    assert_no_leak(fake)


# -- the stop gate ------------------------------------------------------------------------------


async def test_an_approval_pending_at_abort_is_cancelled_once_and_the_stop_gate_denies_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies: list[dict[str, Any]] = []
    gate: list[dict[str, Any]] = []

    async def script(cli: FakeTurn) -> None:
        replies.append(await cli.ask_permission("Bash", BASH, tool_use_id="toolu_rm"))
        # A CLI that goes on after the stop: its next tool call meets the stop gate.
        (callback_id,) = cli.process.hook_callback_ids["PreToolUse"]
        gate.append(
            await cli.hook_callback(callback_id, {"tool_name": "Bash"}, tool_use_id="toolu_2")
        )

    fake = FakeCLI(script, ignores_interrupts=True)
    watch = Watch()
    answers: list[Any] = []
    async with fake_session(fake, params=ASKING, on_user_input="manual") as session:

        async def aborter() -> None:
            request = await watch.wait_for("user_input_request")
            await trio.sleep(1.0)
            await session.abort()
            answers.append(await session.answer(request.request_id, "allow"))

        events = await run_with(session, watch, aborter)
    assert [r.outcome for r in resolved(events)] == ["cancelled"]
    assert answers == [
        AnswerRejected(request_id="approve-1", reason="request 'approve-1' is already cancelled")
    ]
    assert replies == [CANCELLED_REPLY]
    (hook,) = gate
    assert hook["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert hook["hookSpecificOutput"]["permissionDecisionReason"] == STOPPED
    assert_no_leak(fake)
